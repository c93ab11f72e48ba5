// Rate budgets in the suite's Redis: what a process reports of the spending it
// decided in memory (report-spending.lua) lands in the state charge-budget.lua keeps.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RateBudgetStore } from "../../../../src/domain/ports/index.js";
import type { RedisClient } from "../../../../src/stores/redis/client.js";
import { createRedisKeys } from "../../../../src/stores/redis/keys.js";
import { createRateBudgetStore } from "../../../../src/stores/redis/rate-budget-store.js";
import { openRedis, uniqueTag } from "../../../support/env.js";

let redis: RedisClient;
let budgets: RateBudgetStore;

beforeAll(async () => {
  redis = await openRedis();
  budgets = createRateBudgetStore(redis, createRedisKeys(16));
});
afterAll(async () => {
  await redis.quit();
});

// 10 a minute: a unit refills in 6 s.
const spending = (subject: string, units: number) => ({ budget: "userMutations", subject, units, limit: 10, periodMs: 60_000 });
/** Whether `ms` is `expected` give or take the milliseconds a test call takes. */
const about = (ms: number | undefined, expected: number) => ms !== undefined && ms <= expected && ms > expected - 1_000;

describe("reported spending", () => {
  it("when spendings are reported, then Redis adds them to what the budget holds and answers how far it is spent", async () => {
    const [alice, bob] = [uniqueTag(), uniqueTag()];
    const [first, other] = await budgets.report([spending(alice, 3), spending(bob, 1)]);
    expect(about(first, 18_000)).toBe(true);
    expect(about(other, 6_000)).toBe(true);
    // A second process's report adds to the first's.
    const [second] = await budgets.report([spending(alice, 4)]);
    expect(about(second, 42_000)).toBe(true);
    // The state is the one a charge in Redis reads: 3 units are left, not 4.
    const charged = await budgets.charge("userMutations", alice, 3, 10, 60_000);
    expect(charged.waitMs).toBe(0);
    // Full again once all 10 units refilled: 60 s after the report's 7 and the charge's 3.
    expect(about(charged.aheadMs, 60_000)).toBe(true);
    const refused = await budgets.charge("userMutations", alice, 1, 10, 60_000);
    expect(refused.waitMs).toBeGreaterThan(0);
    expect(about(refused.aheadMs, 60_000)).toBe(true);
  });

  it("when more is reported than the budget holds, or a report is resent, then it is added whatever it holds, and the budget is never more than one period spent", async () => {
    const alice = uniqueTag();
    const [over] = await budgets.report([spending(alice, 25)]);
    expect(about(over, 60_000)).toBe(true);
    const [resent] = await budgets.report([spending(alice, 25)]);
    expect(about(resent, 60_000)).toBe(true);
    expect(await redis.pttl(createRedisKeys(16).rateBudget("userMutations", alice))).toBeLessThanOrEqual(60_001);
  });

  it("when a report holds no unit, then the store refuses it as a fault and writes nothing", async () => {
    const alice = uniqueTag();
    await expect(budgets.report([spending(alice, 0)])).rejects.toThrow(/report-spending answered status -3 \(InvalidArguments\)/);
    expect(await redis.exists(createRedisKeys(16).rateBudget("userMutations", alice))).toBe(0);
  });
});
