// What an operation may cost before it runs: roughly the objects it could resolve.
// graphql-query-complexity walks the operation (fragments, @skip/@include and
// variables included); the estimator below prices each field.
import { getNamedType, GraphQLError, isLeafType, type DocumentNode, type GraphQLSchema } from "graphql";
import { getComplexity, type ComplexityEstimatorArgs } from "graphql-query-complexity";

/**
 * How many times a field's selection runs: `first` for a connection (its schema
 * default when not given), the length of a list argument such as `posts(ids:)`,
 * else once. At least once: `first: 0` still runs the field's own query.
 */
function fanOut(args: Record<string, unknown>): number {
  let times = 1;
  if (typeof args.first === "number") times = Math.max(times, args.first);
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
