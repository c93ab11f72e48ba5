// Rate budgets at the GraphQL edge: chargeOperation spends them before anything
// runs (mutations per user and per address, sign-ins per address, one unit per
// root field; expensive queries by their cost), and rateLimitPlugin answers a
// refusal as HTTP 429. Sign-ins per username are charged by the login use case,
// which alone knows the username.
import type { ApolloServerPlugin, HeaderMap } from "@apollo/server";
import { OperationTypeNode, type DocumentNode, type GraphQLError, type OperationDefinitionNode } from "graphql";
import { tighter, type BudgetStanding, type Charge } from "../../domain/rate-limits.js";
import { RateLimitedError } from "../../errors.js";
import { tokenRefused } from "./authentication-plugin.js";
import { addressSubject } from "../client-address.js";
import type { Context } from "../context.js";
import { rootFieldNames, signInFields } from "../root-fields.js";

export { addressSubject };

/** The refusal with the longest wait among a response's errors, if any. */
function longestRefusal(errors: readonly GraphQLError[] | undefined): RateLimitedError | null {
  let longest: RateLimitedError | null = null;
  if (!errors) return longest;
  for (const { originalError } of errors) {
    if (originalError instanceof RateLimitedError && (!longest || originalError.retryAfterSeconds > longest.retryAfterSeconds)) longest = originalError;
  }
  return longest;
}

/**
 * The widespread RateLimit-* fields (draft-ietf-httpapi-ratelimit-headers-06, as
 * most gateways and client libraries read them): Reset is the seconds until the
 * budget is full again, not until the next unit.
 */
function setRateLimitHeaders(headers: HeaderMap, { limit, remaining, resetSeconds }: BudgetStanding): void {
  headers.set("ratelimit-limit", String(limit));
  headers.set("ratelimit-remaining", String(remaining));
  headers.set("ratelimit-reset", String(resetSeconds));
}

/**
 * Tells every charged response where its tightest budget stands (RateLimit-*
 * headers), and answers RATE_LIMITED as HTTP 429 with Retry-After (the longest
 * `retryAfterSeconds` of the response) when nothing ran, whichever stage refused.
 */
export function rateLimitPlugin(): ApolloServerPlugin<Context> {
  return {
    async requestDidStart() {
      return {
        async willSendResponse({ response, errors, contextValue }) {
          let standing = contextValue.charged.standing;
          const refusal = longestRefusal(errors);
          if (refusal) {
            if (refusal.budget) standing = tighter(standing, { limit: refusal.budget.limit, remaining: 0, resetSeconds: refusal.budget.resetSeconds });
            if (response.body.kind === "single" && response.body.singleResult.data == null) {
              response.http.status = 429;
              response.http.headers.set("retry-after", String(refusal.retryAfterSeconds));
              // A refusal from a resolver (a username's sign-ins, known only to the login use case) that left
              // no data answers in the edge's shape: errors alone, no data or path. Only when every error is a
              // refusal: another error's path says which field failed.
              const { errors: formatted = [], extensions } = response.body.singleResult;
              if (errors?.every(({ originalError }) => originalError instanceof RateLimitedError)) {
                response.body.singleResult = {
                  errors: formatted.map(({ path: _path, locations: _locations, ...error }) => error),
                  ...(extensions && { extensions }),
                };
              }
            }
          }
          if (standing) setRateLimitHeaders(response.http.headers, standing);
        },
      };
    },
  };
}

/**
 * What a like's charges worked out anew on every request, remembered: the subjects
 * of the addresses seen lately (client-address.ts) and the root fields of each
 * mutation (a walk of the operation with a Map and a Set of its own); both were
 * about 1.5% of a like's CPU under load, measured with perf. Apollo hands the same
 * operation node for every repeat of a document, so its root fields live as long
 * as Apollo's document cache keeps the document.
 */
const rootFieldsByOperation = new WeakMap<OperationDefinitionNode, readonly string[]>();

function rootFieldsOf(operation: OperationDefinitionNode, document: DocumentNode): readonly string[] {
  let fields = rootFieldsByOperation.get(operation);
  if (!fields) {
    fields = rootFieldNames(operation, document);
    rootFieldsByOperation.set(operation, fields);
  }
  return fields;
}

/** A mutation's charges: one unit per root field, sign-ins to their own budget. */
function mutationCharges(ctx: Context, operation: OperationDefinitionNode, document: DocumentNode): Charge[] {
  if (operation.operation !== OperationTypeNode.MUTATION) return [];
  const fields = rootFieldsOf(operation, document);
  const signIns = fields.filter((name) => signInFields.has(name)).length;
  const others = fields.length - signIns;
  const charges: Charge[] = [];
  const address = addressSubject(ctx.clientIp);
  if (signIns > 0) charges.push({ budget: "ipSignIns", subject: address, cost: signIns });
  if (others > 0) {
    charges.push({ budget: "ipMutations", subject: address, cost: others });
    if (ctx.viewer) charges.push({ budget: "userMutations", subject: ctx.viewer.userId.toString(), cost: others });
  }
  return charges;
}

/** An expensive query's charges: its cost, when it reaches the threshold; cheaper ones pay nothing. */
function costCharges(ctx: Context, cost: number): Charge[] {
  if (!(cost >= ctx.services.rateLimits.queryCostThreshold)) return [];
  const charges: Charge[] = [{ budget: "ipQueryCost", subject: addressSubject(ctx.clientIp), cost }];
  if (ctx.viewer) charges.push({ budget: "viewerQueryCost", subject: ctx.viewer.userId.toString(), cost });
  return charges;
}

/**
 * Spends what an operation costs its caller, as the request limits' `onCost` hook:
 * only operations every check lets through pay (a refused document of 450 aliased
 * likes, or a bad token, spends nothing), and nothing has run yet. Throws
 * RATE_LIMITED when a budget is spent.
 */
export async function chargeOperation(ctx: Context, cost: number, operation: OperationDefinitionNode, document: DocumentNode): Promise<void> {
  // Refused anyway, by the authentication plugin or the executor (subscriptions need
  // graphql-ws): Apollo runs the plugins' checks side by side, so they must not pay here.
  if (operation.operation === OperationTypeNode.SUBSCRIPTION || tokenRefused(ctx, operation, document)) return;
  const charges = [...mutationCharges(ctx, operation, document), ...costCharges(ctx, cost)];
  if (charges.length > 0) ctx.charged.standing = tighter(ctx.charged.standing, await ctx.services.rateLimits.charge(charges));
}
