import { Kind, type DocumentNode, type OperationDefinitionNode, type SelectionSetNode } from "graphql";

/**
 * The names of the root fields an operation resolves, one entry per response key
 * (`a: likePost … b: likePost …` is two; the same key twice merges into one),
 * through inline fragments and fragment spreads. `__typename` runs nothing and is
 * left out. Directives (@skip/@include) are ignored: a skipped field still counts.
 */
export function rootFieldNames(operation: OperationDefinitionNode, document: DocumentNode): string[] {
  const fragments = new Map(document.definitions.flatMap((d) => (d.kind === Kind.FRAGMENT_DEFINITION ? [[d.name.value, d] as const] : [])));
  const byResponseKey = new Map<string, string>();
  const spread = new Set<string>();
  const walk = (selectionSet: SelectionSetNode) => {
    for (const selection of selectionSet.selections) {
      if (selection.kind === Kind.FIELD) {
        const name = selection.name.value;
        if (name !== "__typename") byResponseKey.set(selection.alias?.value ?? name, name);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        walk(selection.selectionSet);
      } else {
        const fragment = fragments.get(selection.name.value);
        // Validation refused cycles already; a fragment spread twice adds no new response keys.
        if (fragment && !spread.has(fragment.name.value)) {
          spread.add(fragment.name.value);
          walk(fragment.selectionSet);
        }
      }
    }
  };
  walk(operation.selectionSet);
  return [...byResponseKey.values()];
}

/** The mutations that sign a caller in: allowed with a bad token, and charged to the sign-in budgets. */
export const signInFields: ReadonlySet<string> = new Set(["login", "register"]);
