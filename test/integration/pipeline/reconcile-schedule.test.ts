import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scheduleReconcile } from "../../../src/pipeline/reconcile-schedule.js";
import type { ReconcileSummary } from "../../../src/pipeline/reconcile-pass.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createLease } from "../../../src/stores/redis/lease-store.js";
import { openRedis, silentLogger, uniqueTag } from "../../support/env.js";

let redis: RedisClient;
beforeAll(async () => {
  redis = await openRedis();
});
afterAll(async () => {
  await redis.quit();
});

const emptySummary: ReconcileSummary = {
  targetsChecked: 0,
  inFlight: { count: 0, sample: [] },
  stuck: { count: 0, sample: [] },
  rebuiltBehind: { count: 0, sample: [] },
  behindKept: { count: 0, sample: [] },
  walked: 0,
  differences: { missingInDatabase: 0, strayInDatabase: 0, databaseCounter: 0, redisCounter: 0, derivedCounter: 0, redisDerivedCounter: 0, views: 0 },
  repairsSent: 0,
  evicted: 0,
  seconds: 0,
};

describe("reconcile schedule", () => {
  it("when two workers share a schedule, then each tick runs one pass, never two at once", async () => {
    const lockKey = `reconcile:lock:${uniqueTag()}`;
    let running = 0;
    let overlapped = false;
    let passes = 0;
    const run = async () => {
      running++;
      overlapped ||= running > 1;
      passes++;
      await sleep(300);
      running--;
      return emptySummary;
    };
    const workers = [0, 1].map(() => scheduleReconcile({ cron: "* * * * * *", lease: createLease(redis, lockKey), run, logger: silentLogger }));
    await sleep(3_200);
    await Promise.all(workers.map((w) => w.stop()));
    expect(overlapped).toBe(false);
    expect(passes).toBeGreaterThanOrEqual(2);
    expect(passes).toBeLessThanOrEqual(4);
    expect(await redis.exists(lockKey)).toBe(0);
  });
});
