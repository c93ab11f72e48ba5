import { Kind, type GraphQLResolveInfo, type SelectionSetNode } from "graphql";

/** Whether the query selects the field at `path` below the field being resolved (fragments included). */
export function selects(info: GraphQLResolveInfo, path: readonly string[]): boolean {
  const visit = (set: SelectionSetNode | undefined, depth: number): boolean =>
    set !== undefined &&
    set.selections.some((selection) => {
      switch (selection.kind) {
        case Kind.FIELD:
          return selection.name.value === path[depth] && (depth === path.length - 1 || visit(selection.selectionSet, depth + 1));
        case Kind.INLINE_FRAGMENT:
          return visit(selection.selectionSet, depth);
        case Kind.FRAGMENT_SPREAD:
          return visit(info.fragments[selection.name.value]?.selectionSet, depth);
      }
    });
  return info.fieldNodes.some((node) => visit(node.selectionSet, 0));
}

/**
 * Whether every field selected at `path` below the field being resolved (its
 * own selection when the path is empty) is one of `names`, fragments included.
 * A field under @skip or @include counts as selected.
 */
export function selectsOnly(info: GraphQLResolveInfo, names: ReadonlySet<string>, path: readonly string[] = []): boolean {
  const within = (set: SelectionSetNode | undefined, depth: number): boolean =>
    set === undefined ||
    set.selections.every((selection) => {
      switch (selection.kind) {
        case Kind.FIELD:
          if (depth === path.length) return names.has(selection.name.value);
          return selection.name.value !== path[depth] || within(selection.selectionSet, depth + 1);
        case Kind.INLINE_FRAGMENT:
          return within(selection.selectionSet, depth);
        case Kind.FRAGMENT_SPREAD: {
          const fragment = info.fragments[selection.name.value];
          return fragment !== undefined && within(fragment.selectionSet, depth);
        }
      }
    });
  return info.fieldNodes.every((node) => within(node.selectionSet, 0));
}
