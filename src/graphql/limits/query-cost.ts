// What an operation may cost before it runs: roughly the objects it could resolve.
// graphql-query-complexity walks the operation (fragments, @skip/@include and
// variables included); the estimator below prices each field.
import {
  getNamedType,
  GraphQLBoolean,
  GraphQLError,
  GraphQLFloat,
  GraphQLID,
  GraphQLInt,
  GraphQLString,
  isLeafType,
  isListType,
  isNonNullType,
  isScalarType,
  typeFromAST,
  type DocumentNode,
  type GraphQLSchema,
  type GraphQLType,
  type OperationDefinitionNode,
} from "graphql";
import { getComplexity, type ComplexityEstimatorArgs } from "graphql-query-complexity";
import { maxPageSize } from "../arguments.js";

/**
 * How many times a field's selection runs: `first` for a connection (its schema
 * default when not given), the length of a list argument such as `posts(ids:)`,
 * else once. At least once: `first: 0` still runs the field's own query.
 */
function fanOut(args: Record<string, unknown>): number {
  let times = 1;
  // Priced at most a page: a larger `first` is refused by its resolver (BAD_USER_INPUT) before it costs anything.
  if (typeof args.first === "number") times = Math.max(times, Math.min(args.first, maxPageSize));
  for (const value of Object.values(args)) {
    if (Array.isArray(value)) times = Math.max(times, value.length);
  }
  return times;
}

/**
 * An object field costs 1 plus what its selection costs, times its fan-out; a
 * scalar costs nothing of its own, since it is read from an object already loaded.
 * So `feed(first: 100) { edges { node { id author { id } } } }` costs 100 × (1 + 1 + 1 + 1) = 400.
 */
export function fieldCost({ field, args, childComplexity }: ComplexityEstimatorArgs): number {
  const own = isLeafType(getNamedType(field.type)) ? 0 : 1;
  return (own + childComplexity) * fanOut(args);
}

/**
 * Selections evaluated while pricing, fragments expanded each time they are used:
 * bounds the work of pricing a document built to explode (fragments spread into
 * fragments), long before it could approach Apollo's own parse bound.
 */
export const maxPricedSelections = 10_000;

export type QueryCost = { readonly cost: number } | { readonly tooManySelections: true } | { readonly badVariables: GraphQLError };

export function queryCost(schema: GraphQLSchema, document: DocumentNode, operationName: string | undefined, variables: Record<string, unknown>): QueryCost {
  try {
    return {
      cost: getComplexity({ schema, query: document, operationName, variables, estimators: [fieldCost], maxQueryNodes: maxPricedSelections }),
    };
  } catch (error) {
    // The library throws its node bound and the variables' coercion errors as GraphQLErrors;
    // anything else is a fault of ours and stays one.
    if (!(error instanceof GraphQLError)) throw error;
    if (error.message.startsWith("Query exceeds the maximum allowed number of nodes")) return { tooManySelections: true };
    return { badVariables: error };
  }
}

/**
 * A key for the variables of one operation that is equal for two sets of variables
 * only when both coerce without error and `queryCost` prices them the same, so a
 * price may be cached under it; null when this cannot be vouched for cheaply, and
 * the operation must be priced (and its variables coerced) afresh.
 *
 * The key keeps what can reach `fieldCost` or the library's walk: numbers (a
 * `first`), list lengths (a list argument's fan-out), booleans (@skip/@include),
 * and whether a variable is null or absent (which decides an argument's value). It
 * drops the content of strings and IDs and the items of lists, which `fanOut` never
 * reads: so `posts(ids:)` with 100 new ids every request is one key. A change to
 * what `fieldCost` reads must be matched here.
 *
 * Coercion is what costs most in pricing (graphql coerces 100 IDs in about 20 µs),
 * so validity is checked here by graphql 16's own rules for the built-in scalars,
 * lists and non-null types (and federation's `_Any`) only; any other type (an enum, an input object, a custom
 * scalar) makes the key null, and so does any value these rules refuse, so bad
 * variables always reach the library's coercion and its error.
 */
export function createVariablesSignature(schema: GraphQLSchema, operation: OperationDefinitionNode): (variables: Record<string, unknown>) => string | null {
  const definitions = (operation.variableDefinitions ?? []).map((definition) => {
    const type = typeFromAST(schema, definition.type);
    return {
      name: definition.variable.name.value,
      required: type !== undefined && isNonNullType(type),
      hasDefault: definition.defaultValue !== undefined,
      signatureOf: type === undefined ? unsupported : valueSignature(type),
    };
  });
  return (variables) => {
    let signature = "";
    for (const { name, required, hasDefault, signatureOf } of definitions) {
      let part: string | null;
      // Whether an absent variable takes a default is fixed by the document, so "u" covers both.
      if (!Object.hasOwn(variables, name)) part = required && !hasDefault ? null : "u";
      else part = signatureOf(variables[name]);
      if (part === null) return null;
      signature += part + ",";
    }
    return signature;
  };
}

type ValueSignature = (value: unknown) => string | null;

const unsupported: ValueSignature = () => null;

/**
 * A value's part of the key when graphql would coerce it to `type` without error,
 * else null. Built once per operation: graphql's type predicates are slow outside
 * production (its instanceOf looks at class names when a check fails), and the
 * bench's 100 ids would ask them 300 times a request.
 */
function valueSignature(type: GraphQLType): ValueSignature {
  if (isNonNullType(type)) {
    const ofType = valueSignature(type.ofType);
    return (value) => (value == null ? null : ofType(value));
  }
  if (isListType(type)) {
    const item = valueSignature(type.ofType);
    return (value) => {
      if (value == null) return "n";
      // A value that is not a list is coerced to a list of one.
      if (!Array.isArray(value)) return item(value) === null ? null : "[1]";
      for (const each of value as unknown[]) if (item(each) === null) return null;
      return `[${value.length}]`;
    };
  }
  const scalar = scalarSignature(type);
  return scalar === unsupported ? unsupported : (value) => (value == null ? "n" : scalar(value));
}

function scalarSignature(type: GraphQLType): ValueSignature {
  switch (type) {
    case GraphQLID:
      return (value) => (typeof value === "string" || (typeof value === "number" && Number.isInteger(value)) ? "s" : null);
    case GraphQLString:
      return (value) => (typeof value === "string" ? "s" : null);
    case GraphQLInt:
      return (value) => (typeof value === "number" && Number.isInteger(value) && value <= 2_147_483_647 && value >= -2_147_483_648 ? String(value) : null);
    case GraphQLFloat:
      return (value) => (typeof value === "number" && Number.isFinite(value) ? String(value) : null);
    case GraphQLBoolean:
      return (value) => (value === true ? "t" : value === false ? "f" : null);
    default:
      // Federation's representations: `_Any` takes any value as it is (it has no parseValue),
      // and only the list's length is priced, so 100 representations are one key.
      return isScalarType(type) && type.name === "_Any" ? () => "s" : unsupported;
  }
}
