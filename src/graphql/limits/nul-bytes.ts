// PostgreSQL cannot store a NUL byte in text and answers an error mid-request, so
// no argument of this schema may carry one. Checked for every argument, written
// inline or passed as a variable, before anything runs; the use cases still check
// their own text rules (control characters, length) for the arguments they take.
import { Kind, visit, type DocumentNode, type ValueNode } from "graphql";

function holdsNul(value: unknown): boolean {
  if (typeof value === "string") return value.includes("\u0000");
  if (Array.isArray(value)) return value.some(holdsNul);
  if (typeof value === "object" && value !== null) return Object.values(value).some(holdsNul);
  return false;
}

function literalHoldsNul(node: ValueNode, variables: Record<string, unknown>): boolean {
  switch (node.kind) {
    case Kind.STRING:
      return node.value.includes("\u0000");
    case Kind.VARIABLE:
      return holdsNul(variables[node.name.value]);
    case Kind.LIST:
      return node.values.some((v) => literalHoldsNul(v, variables));
    case Kind.OBJECT:
      return node.fields.some((f) => literalHoldsNul(f.value, variables));
    default:
      return false;
  }
}

/** The name of the first argument whose value holds a NUL byte, or null. */
export function argumentWithNul(document: DocumentNode, variables: Record<string, unknown>): string | null {
  let found: string | null = null;
  visit(document, {
    Argument(node) {
      if (found === null && literalHoldsNul(node.value, variables)) found = node.name.value;
    },
  });
  return found;
}
