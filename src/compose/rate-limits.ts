// The part of the composition root that builds the rate budgets from their settings.
import type { Logger } from "pino";
import type { Config } from "../config.js";
import type { RateBudgetStore, Reachability } from "../domain/ports/index.js";
import { createRateLimits, type RateLimits } from "../domain/rate-limits.js";
import { rateBudgetPeriodMs } from "./tunables.js";

export function composeRateLimits(limits: Config["rateLimits"], store: RateBudgetStore, reachability: Reachability, logger: Logger): RateLimits {
  return createRateLimits({
    store,
    reachability,
    settings: {
      enabled: limits.enabled,
      periodMs: rateBudgetPeriodMs,
      queryCostThreshold: limits.queryCostThreshold,
      localSubjects: limits.localSubjects,
      limits: {
        userMutations: limits.userMutations,
        ipMutations: limits.ipMutations,
        ipSignIns: limits.ipSignIns,
        usernameLogins: limits.usernameLogins,
        viewerQueryCost: limits.viewerQueryCost,
        ipQueryCost: limits.ipQueryCost,
      },
    },
    onStoreFailure: (err, during) =>
      during === "charge"
        ? logger.warn({ err }, "rate budgets could not be read from Redis; each process decides them alone, in memory, for a second")
        : logger.warn({ err }, "mutation budgets could not be shared through Redis; each process decides alone for a second"),
  });
}
