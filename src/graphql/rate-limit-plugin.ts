// Spends the caller's rate budgets before anything runs: mutations per user and
// per address, sign-ins per address, counted per root field (an operation of 10
// aliased likes pays 10), and expensive queries by their cost. Sign-ins per
// username are charged by the login use case, which alone knows the username.
import type { ApolloServerPlugin } from "@apollo/server";
import { OperationTypeNode, type DocumentNode, type OperationDefinitionNode } from "graphql";
import type { Charge } from "../domain/rate-limits.js";
import { ErrorCode } from "../errors.js";
import type { Context } from "./context.js";
import { rootFieldNames, signInFields } from "./root-fields.js";

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

/** A mutation's charges: one unit per root field, sign-ins to their own budget. */
function mutationCharges(ctx: Context, operation: OperationDefinitionNode, document: DocumentNode): Charge[] {
  if (operation.operation !== OperationTypeNode.MUTATION) return [];
  const fields = rootFieldNames(operation, document);
  const signIns = fields.filter((name) => signInFields.has(name)).length;
  const others = fields.length - signIns;
  const charges: Charge[] = [];
  if (signIns > 0) charges.push({ budget: "ipSignIns", subject: ctx.clientIp, cost: signIns });
  if (others > 0) {
    charges.push({ budget: "ipMutations", subject: ctx.clientIp, cost: others });
    if (ctx.viewer) charges.push({ budget: "userMutations", subject: ctx.viewer.userId.toString(), cost: others });
  }
  return charges;
}

/** An expensive query's charges: its cost, when it reaches the threshold; cheaper ones pay nothing. */
function costCharges(ctx: Context, cost: number): Charge[] {
  if (!(cost >= ctx.services.rateLimits.queryCostThreshold)) return [];
  const charges: Charge[] = [{ budget: "ipQueryCost", subject: ctx.clientIp, cost }];
  if (ctx.viewer) charges.push({ budget: "viewerQueryCost", subject: ctx.viewer.userId.toString(), cost });
  return charges;
}

/**
 * Spends what an operation costs its caller, as the request limits' `onCost` hook:
 * only operations the limits let through pay (a refused document of 450 aliased
 * likes spends nothing), and nothing has run yet. Throws RATE_LIMITED when a budget is spent.
 */
export async function chargeOperation(ctx: Context, cost: number, operation: OperationDefinitionNode, document: DocumentNode): Promise<void> {
  const charges = [...mutationCharges(ctx, operation, document), ...costCharges(ctx, cost)];
  if (charges.length > 0) await ctx.services.rateLimits.charge(charges);
}

/** Charges a query's cost alone (chargeOperation's second half). */
export async function chargeQueryCost(ctx: Context, cost: number): Promise<void> {
  const charges = costCharges(ctx, cost);
  if (charges.length > 0) await ctx.services.rateLimits.charge(charges);
}
