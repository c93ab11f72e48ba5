// Rate budgets at the GraphQL edge: chargeOperation spends them before anything
// runs (mutations per user and per address, sign-ins per address, one unit per
// root field; expensive queries by their cost), and rateLimitPlugin answers a
// refusal as HTTP 429. Sign-ins per username are charged by the login use case,
// which alone knows the username.
import type { ApolloServerPlugin } from "@apollo/server";
import { OperationTypeNode, type DocumentNode, type OperationDefinitionNode } from "graphql";
import type { Charge } from "../domain/rate-limits.js";
import { ErrorCode } from "../errors.js";
import { tokenRefused } from "./authentication-plugin.js";
import { addressSubject } from "./client-address.js";
import type { Context } from "./context.js";
import { rootFieldNames, signInFields } from "./root-fields.js";

export { addressSubject };

/**
 * Answers RATE_LIMITED as HTTP 429 with Retry-After (the longest
 * `retryAfterSeconds` of the response) when nothing ran, whichever stage refused.
 */
export function rateLimitPlugin(): ApolloServerPlugin<Context> {
  return {
    async requestDidStart() {
      return {
        async willSendResponse({ response }) {
          if (response.body.kind !== "single") return;
          const { data, errors } = response.body.singleResult;
          if (data != null || !errors) return;
          const waits = errors.filter((e) => e.extensions?.code === ErrorCode.RATE_LIMITED).map((e) => Number(e.extensions?.retryAfterSeconds) || 1);
          if (waits.length === 0) return;
          response.http.status = 429;
          response.http.headers.set("retry-after", String(Math.max(...waits)));
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
  if (charges.length > 0) await ctx.services.rateLimits.charge(charges);
}
