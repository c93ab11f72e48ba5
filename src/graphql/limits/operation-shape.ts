// The shape of one operation, fragments expanded: how deep its fields nest, how
// many fields it renames, and how many root fields it asks for. Written here rather
// than taken from GraphQL Armor: Armor's depth and alias rules throw an uncoded
// "Syntax Error" from inside validation, with the measured numbers only in the
// message (this service answers with a code and the numbers in `extensions`), and
// its depth rule counts each fragment spread as a level of its own.
import { rootFieldNames } from "../root-fields.js";
import { Kind, type DocumentNode, type FragmentDefinitionNode, type OperationDefinitionNode, type SelectionSetNode } from "graphql";

export interface OperationShape {
  /** Levels of fields below the root, leaves included; `{ post(id: 1) { id } }` is 2. */
  readonly depth: number;
  /** Fields written with an alias, counted once per place they are executed (a fragment spread twice counts twice). */
  readonly aliases: number;
  /** Root fields by response key, `__typename` aside: the mutations a mutation operation runs (the budgets count the same). */
  readonly rootFields: number;
}

/** Introspection is its own, bounded query over the schema; development tools send it deep. */
const introspectionRoots = new Set(["__schema", "__type"]);

interface Measure {
  readonly depth: number;
  readonly aliases: number;
}

export function measureOperation(document: DocumentNode, operation: OperationDefinitionNode): OperationShape {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  }
  // Each fragment is measured once, so a document that spreads fragments into each
  // other many times costs linear time here (the totals may still grow large).
  const measured = new Map<string, Measure>();
  const inProgress = new Set<string>();

  function fragment(name: string): Measure {
    const known = measured.get(name);
    if (known) return known;
    const definition = fragments.get(name);
    // Unknown fragments and cycles fail validation before this runs; measured as empty they cannot loop.
    if (!definition || inProgress.has(name)) return { depth: 0, aliases: 0 };
    inProgress.add(name);
    const result = selectionSet(definition.selectionSet);
    inProgress.delete(name);
    measured.set(name, result);
    return result;
  }

  function selectionSet(set: SelectionSetNode): Measure {
    let depth = 0;
    let aliases = 0;
    for (const selection of set.selections) {
      let inner: Measure;
      if (selection.kind === Kind.FIELD) {
        if (introspectionRoots.has(selection.name.value)) continue;
        const below = selection.selectionSet ? selectionSet(selection.selectionSet) : { depth: 0, aliases: 0 };
        inner = { depth: below.depth + 1, aliases: below.aliases + (selection.alias ? 1 : 0) };
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        inner = selectionSet(selection.selectionSet);
      } else {
        inner = fragment(selection.name.value);
      }
      depth = Math.max(depth, inner.depth);
      aliases += inner.aliases;
    }
    return { depth, aliases };
  }

  const { depth, aliases } = selectionSet(operation.selectionSet);
  return { depth, aliases, rootFields: rootFieldNames(operation, document).length };
}
