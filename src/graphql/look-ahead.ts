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
