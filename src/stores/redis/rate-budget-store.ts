import { Cluster } from "ioredis";
import type { RateBudgetStore } from "../../domain/ports/index.js";
import { inTickPipeline, type RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";
import { ScriptReplyError, ScriptStatus, type ScriptReply } from "./statuses.js";

/** Refill time per unit in microseconds, at least 1: a budget of more than one unit per µs is no budget. */
const intervalMicros = (periodMs: number, limit: number) => Math.max(1, Math.round((periodMs * 1000) / limit));

/**
 * Rate budgets in Redis, one key each: charged by scripts/charge-budget.lua against
 * Redis's clock, or told what a process spent by scripts/report-spending.lua.
 */
export function createRateBudgetStore(redis: RedisClient, keys: RedisKeys): RateBudgetStore {
  return {
    async charge(budget, subject, cost, limit, periodMs) {
      const [status, waitMicros = 0, aheadMicros = 0] = await redis.chargeBudget(
        keys.rateBudget(budget, subject),
        intervalMicros(periodMs, limit),
        limit,
        cost,
      );
      const aheadMs = aheadMicros / 1000;
      if (status === ScriptStatus.Applied) return { waitMs: 0, aheadMs };
      if (status === ScriptStatus.OverBudget) return { waitMs: Math.max(1, Math.ceil(waitMicros / 1000)), aheadMs };
      throw new ScriptReplyError("charge-budget", status, `budget ${budget} (cost ${cost}, limit ${limit})`);
    },
    async report(spendings) {
      if (spendings.length === 0) return [];
      const calls = spendings.map(
        ({ budget, subject, units, limit, periodMs }) => [keys.rateBudget(budget, subject), intervalMicros(periodMs, limit), limit, units] as const,
      );
      // Each budget is its own slot: a cluster's auto-pipelining sends them one pipeline per node;
      // a standalone Redis takes them in the pipeline of the current tick, with whatever else goes.
      const replies =
        redis instanceof Cluster
          ? await Promise.all(calls.map((call) => redis.reportSpending(...call)))
          : ((await inTickPipeline(redis, (pipeline) => calls.forEach((call) => void pipeline.reportSpending(...call)))) as ScriptReply<number>[]);
      return replies.map(([status, aheadMicros = 0], i) => {
        if (status === ScriptStatus.Applied) return aheadMicros / 1000;
        const { budget, units, limit } = spendings[i] as (typeof spendings)[number];
        throw new ScriptReplyError("report-spending", status, `budget ${budget} (units ${units}, limit ${limit})`);
      });
    },
  };
}
