// Limits on what one GraphQL request may ask for, checked once the operation is
// parsed, validated and chosen, and before the context's loaders, any resolver or
// any store call runs. A refusal is a coded error with what was measured and the
// limit in `extensions`, answered with HTTP 400. Arguments holding a NUL byte are
// refused here too (BAD_USER_INPUT), since no store could take them.
import type { ApolloServerPlugin } from "@apollo/server";
import { GraphQLError, type DocumentNode, type GraphQLSchema, type OperationDefinitionNode } from "graphql";
import { ErrorCode, RequestErrorCode } from "../../errors.js";
import type { Context } from "../context.js";
import { createLimitsMemo } from "./limits-memo.js";
import type { OperationShape } from "./operation-shape.js";
import { maxPricedSelections } from "./query-cost.js";

export interface RequestLimits {
  /** Levels of nested fields (MAX_QUERY_DEPTH). */
  readonly depth: number;
  /** Priced cost of the operation (MAX_QUERY_COST; see query-cost.ts). */
  readonly cost: number;
  /** Aliased fields in the operation, fragments expanded (MAX_ALIASES). */
  readonly aliases: number;
  /** Root fields of a mutation operation (MAX_MUTATIONS). */
  readonly mutations: number;
  /** Values in the variables, every list item and object field counted (MAX_VARIABLE_VALUES). */
  readonly variableValues: number;
}

export interface RequestLimitsOptions {
  readonly schema: GraphQLSchema;
  readonly limits: RequestLimits;
  /**
   * Called once an operation passed every limit and before it executes, with its
   * cost, so that a rate limiter charges only operations the limits let through. An
   * error it throws (a GraphQLError with a code) is the response, and nothing executes.
   */
  readonly onCost?: (context: Context, cost: number, operation: OperationDefinitionNode, document: DocumentNode) => Promise<void>;
}

function refuse(code: string, message: string, measured: Record<string, number | null>): GraphQLError {
  return new GraphQLError(message, { extensions: { code, ...measured, http: { status: 400 } } });
}

/** Values in the variables, counting stops just past `limit` so a huge list costs no more than a small one. */
export function countVariableValues(variables: Record<string, unknown>, limit: number): number {
  let count = 0;
  const pending: unknown[] = Object.values(variables);
  while (pending.length > 0 && count <= limit) {
    const value = pending.pop();
    count++;
    if (Array.isArray(value)) for (const item of value) pending.push(item);
    else if (typeof value === "object" && value !== null) for (const item of Object.values(value)) pending.push(item);
  }
  return count;
}

function checkShape(shape: OperationShape, operation: string, limits: RequestLimits): GraphQLError | null {
  if (shape.depth > limits.depth) {
    return refuse(
      RequestErrorCode.QUERY_TOO_DEEP,
      `The operation nests fields ${shape.depth} levels deep; at most ${limits.depth} are allowed. Ask for less at once and fetch deeper levels in follow-up queries.`,
      { depth: shape.depth, limit: limits.depth },
    );
  }
  if (shape.aliases > limits.aliases) {
    return refuse(
      RequestErrorCode.TOO_MANY_ALIASES,
      `The operation uses ${shape.aliases} aliases; at most ${limits.aliases} are allowed. Split it into several requests.`,
      { aliases: shape.aliases, limit: limits.aliases },
    );
  }
  if (operation === "mutation" && shape.rootFields > limits.mutations) {
    return refuse(
      RequestErrorCode.TOO_MANY_MUTATIONS,
      `The operation runs ${shape.rootFields} mutations; at most ${limits.mutations} are allowed per request. Send the rest in further requests.`,
      { mutations: shape.rootFields, limit: limits.mutations },
    );
  }
  return null;
}

export interface LimitedRequest {
  readonly document: DocumentNode;
  /** Absent when the request's operationName names no operation of the document. */
  readonly operation: OperationDefinitionNode | undefined;
  readonly operationName: string | undefined;
  readonly variables: Record<string, unknown>;
}

/**
 * The limits' verdict on one request: throws the refusal, or answers the
 * operation's cost (null when there is no operation to price). What it learns of a
 * document is kept for the next request sending it (see limits-memo.ts); the
 * answers are the same as without.
 */
export function createRequestLimitsCheck(schema: GraphQLSchema, limits: RequestLimits): (request: LimitedRequest) => number | null {
  const factsOf = createLimitsMemo(schema);
  return ({ document, operation, operationName, variables }) => {
    const values = countVariableValues(variables, limits.variableValues);
    if (values > limits.variableValues) {
      throw refuse(
        RequestErrorCode.VARIABLES_TOO_LARGE,
        `The variables hold more than ${limits.variableValues} values; send fewer (lists such as posts(ids:) take at most 100 ids).`,
        { values, limit: limits.variableValues },
      );
    }
    // Absent when operationName names nothing; the executor answers that with its own code.
    if (!operation) return null;
    const facts = factsOf(document, operation);
    const refusal = checkShape(facts.shape, operation.operation, limits);
    if (refusal) throw refusal;
    const nulIn = facts.argumentWithNul(variables);
    if (nulIn)
      throw new GraphQLError(`${nulIn} must not contain a NUL byte (\\u0000).`, {
        extensions: { code: ErrorCode.BAD_USER_INPUT, field: nulIn, http: { status: 400 } },
      });
    const priced = facts.price(operationName, variables);
    if ("badVariables" in priced) {
      throw new GraphQLError(priced.badVariables.message, {
        nodes: priced.badVariables.nodes,
        extensions: { code: ErrorCode.BAD_USER_INPUT, http: { status: 400 } },
      });
    }
    if ("tooManySelections" in priced) {
      throw refuse(
        RequestErrorCode.QUERY_TOO_COSTLY,
        `The operation expands (fragments included) to more than ${maxPricedSelections} selections. Ask for less at once.`,
        { cost: null, limit: limits.cost },
      );
    }
    if (priced.cost > limits.cost) {
      throw refuse(
        RequestErrorCode.QUERY_TOO_COSTLY,
        `The operation could cost ${priced.cost}; at most ${limits.cost} is allowed. Ask for smaller pages (first) or fewer nested connections.`,
        { cost: priced.cost, limit: limits.cost },
      );
    }
    return priced.cost;
  };
}

export function requestLimitsPlugin(options: RequestLimitsOptions): ApolloServerPlugin<Context> {
  const { schema, limits, onCost } = options;
  const check = createRequestLimitsCheck(schema, limits);
  return {
    async requestDidStart() {
      return {
        async didResolveOperation({ document, operation, operationName, request, contextValue }) {
          const cost = check({ document, operation, operationName: operationName ?? undefined, variables: request.variables ?? {} });
          if (cost === null || !operation) return;
          await onCost?.(contextValue, cost, operation, document);
        },
      };
    },
  };
}
