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

interface ArgumentPlan {
  readonly name: string;
  /** A string written in the document itself holds a NUL. */
  readonly inlineNul: boolean;
  /** Indexes into the document's variable names, of the variables the argument's value uses. */
  readonly variables: readonly number[];
}

/** Whether the strings written in a value hold a NUL, and which variables it uses. */
function scanValue(node: ValueNode, variables: Set<string>): boolean {
  switch (node.kind) {
    case Kind.STRING:
      return node.value.includes("\u0000");
    case Kind.VARIABLE:
      variables.add(node.name.value);
      return false;
    case Kind.LIST:
      return node.values.reduce((nul, v) => scanValue(v, variables) || nul, false);
    case Kind.OBJECT:
      return node.fields.reduce((nul, f) => scanValue(f.value, variables) || nul, false);
    default:
      return false;
  }
}

/**
 * A check answering the name of the first argument of `document` (in document
 * order) whose value holds a NUL byte, or null. Apollo hands back the same
 * DocumentNode for the same query text, so the walk of the document is done here
 * once, and each request only scans the values of the variables arguments use.
 */
export function createNulCheck(document: DocumentNode): (variables: Record<string, unknown>) => string | null {
  const variableIndexes = new Map<string, number>();
  const plans: ArgumentPlan[] = [];
  visit(document, {
    Argument(node) {
      const used = new Set<string>();
      const inlineNul = scanValue(node.value, used);
      if (!inlineNul && used.size === 0) return;
      const indexes = [...used].map((name) => {
        const known = variableIndexes.get(name);
        if (known !== undefined) return known;
        variableIndexes.set(name, variableIndexes.size);
        return variableIndexes.size - 1;
      });
      plans.push({ name: node.name.value, inlineNul, variables: indexes });
    },
  });
  const variableNames = [...variableIndexes.keys()];
  const firstInline = plans.find((plan) => plan.inlineNul)?.name ?? null;
  return (variables) => {
    // Each variable is scanned once, however many arguments use it.
    const nulIn = variableNames.map((name) => holdsNul(variables[name]));
    if (!nulIn.includes(true)) return firstInline;
    return plans.find((plan) => plan.inlineNul || plan.variables.some((index) => nulIn[index]))?.name ?? null;
  };
}
