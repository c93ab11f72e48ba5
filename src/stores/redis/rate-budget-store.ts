import type { RateBudgetStore } from "../../domain/ports.js";
import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";
import { ScriptReplyError, ScriptStatus } from "./statuses.js";

/** Rate budgets in Redis, one key each, spent by scripts/charge-budget.lua against Redis's clock. */
export function createRateBudgetStore(redis: RedisClient, keys: RedisKeys): RateBudgetStore {
  return {
    async charge(budget, subject, cost, limit, periodMs) {
      // Refill time per unit in microseconds, at least 1: a budget of more than one unit per µs is no budget.
      const intervalMicros = Math.max(1, Math.round((periodMs * 1000) / limit));
      const [status, waitMicros = 0] = await redis.chargeBudget(keys.rateBudget(budget, subject), intervalMicros, limit, cost);
      if (status === ScriptStatus.Applied) return 0;
      if (status === ScriptStatus.OverBudget) return Math.max(1, Math.ceil(waitMicros / 1000));
      throw new ScriptReplyError("charge-budget", status, `budget ${budget} (cost ${cost}, limit ${limit})`);
    },
  };
}
