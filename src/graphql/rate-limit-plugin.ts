// Spends the caller's rate budgets before anything runs: mutations per user and
// per address, sign-ins per address, counted per root field (an operation of 40
// aliased likes pays 40). Sign-ins per username are charged by the login use case,
// which alone knows the username; expensive queries by chargeQueryCost below.
import type { ApolloServerPlugin } from "@apollo/server";
import { OperationTypeNode } from "graphql";
import type { Charge } from "../domain/rate-limits.js";
import { ErrorCode } from "../errors.js";
import type { Context } from "./context.js";
import { rootFieldNames, signInFields } from "./root-fields.js";

/**
 * Answers RATE_LIMITED as HTTP 429 with Retry-After (the longest
 * `retryAfterSeconds` of the response) when nothing ran, whichever stage refused.
 * Register it after authenticationPlugin: a caller with a bad token is refused
 * before it spends anything.
 */
export function rateLimitPlugin(): ApolloServerPlugin<Context> {
  return {
    async requestDidStart() {
      return {
        async didResolveOperation({ contextValue: ctx, operation, document }) {
          if (operation?.operation !== OperationTypeNode.MUTATION) return;
          const fields = rootFieldNames(operation, document);
          const signIns = fields.filter((name) => signInFields.has(name)).length;
          const others = fields.length - signIns;
          const charges: Charge[] = [];
          if (signIns > 0) charges.push({ budget: "ipSignIns", subject: ctx.clientIp, cost: signIns });
          if (others > 0) {
            charges.push({ budget: "ipMutations", subject: ctx.clientIp, cost: others });
            if (ctx.viewer) charges.push({ budget: "userMutations", subject: ctx.viewer.userId.toString(), cost: others });
          }
          await ctx.services.rateLimits.charge(charges);
        },
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
 * Charges a query's cost (as the cost rule computed it) to the viewer's and the
 * address's query-cost budgets when it reaches the threshold; throws RATE_LIMITED
 * when either is spent. Cheaper queries cost no budget and no Redis call.
 */
export async function chargeQueryCost(ctx: Context, cost: number): Promise<void> {
  const { rateLimits } = ctx.services;
  if (!(cost >= rateLimits.queryCostThreshold)) return;
  const charges: Charge[] = [{ budget: "ipQueryCost", subject: ctx.clientIp, cost }];
  if (ctx.viewer) charges.push({ budget: "viewerQueryCost", subject: ctx.viewer.userId.toString(), cost });
  await rateLimits.charge(charges);
}
