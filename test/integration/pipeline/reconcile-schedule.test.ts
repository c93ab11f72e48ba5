import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scheduleReconcile } from "../../../src/pipeline/reconcile-schedule.js";
import type { ReconcileSummary } from "../../../src/pipeline/reconcile-pass.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import type { Lease, TickClaims } from "../../../src/domain/ports/index.js";
import { createLease, createTickClaims } from "../../../src/stores/redis/lease-store.js";
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
  listsChecked: 0,
  differences: { missingInDatabase: 0, strayInDatabase: 0, databaseCounter: 0, redisCounter: 0, derivedCounter: 0, redisDerivedCounter: 0, views: 0, list: 0 },
  repairsSent: 0,
  evicted: 0,
  seconds: 0,
};

/** Lease and tick claims as a worker whose clock runs `lateMs` behind the others' sees them: each call that much later. */
function sharedBy(lateMs: number, lockKey: string, tickPrefix: string): { lease: Lease; ticks: TickClaims } {
  const lease = createLease(redis, lockKey);
  const ticks = createTickClaims(redis, tickPrefix, 60_000);
  return {
    lease: { acquire: async (ttlMs) => (await sleep(lateMs), lease.acquire(ttlMs)), release: (token) => lease.release(token) },
    ticks: { claim: async (tick) => (await sleep(lateMs), ticks.claim(tick)) },
  };
}

describe("reconcile schedule", () => {
  it("when a claim of a tick is sent again (its reply lost), then it is still its claimant's, and no one else's", async () => {
    const prefix = `reconcile:tick:${uniqueTag()}:`;
    const tick = new Date(Date.UTC(2026, 0, 1, 3));
    const mine = createTickClaims(redis, prefix, 60_000, "worker-a");
    expect(await mine.claim(tick)).toBe(true);
    expect(await mine.claim(tick)).toBe(true);
    expect(await createTickClaims(redis, prefix, 60_000, "worker-b").claim(tick)).toBe(false);
  });

  it("when two workers share a schedule, then each tick runs one pass, never two at once, even a short pass on a worker whose clock is late", async () => {
    const lockKey = `reconcile:lock:${uniqueTag()}`;
    for (const passMs of [1_300, 20]) {
      let running = 0;
      let overlapped = false;
      const startedInSecond: number[] = [];
      const run = async () => {
        running++;
        overlapped ||= running > 1;
        startedInSecond.push(Math.floor(Date.now() / 1000));
        await sleep(passMs);
        running--;
        return emptySummary;
      };
      const tickPrefix = `reconcile:tick:${uniqueTag()}:`;
      const workers = [0, 300].map((lateMs) => scheduleReconcile({ cron: "* * * * * *", ...sharedBy(lateMs, lockKey, tickPrefix), run, logger: silentLogger }));
      await sleep(3_200);
      await Promise.all(workers.map((w) => w.stop()));
      // Stopping waits for a pass in progress, even one begun a tick before the last.
      expect(running).toBe(0);
      expect(overlapped).toBe(false);
      // One pass a tick: the late worker's claim, 300 ms after a 20 ms pass ended, finds the tick taken.
      expect(new Set(startedInSecond).size).toBe(startedInSecond.length);
      expect(startedInSecond.length).toBeGreaterThanOrEqual(passMs > 1_000 ? 1 : 2);
      expect(await redis.exists(lockKey)).toBe(0);
    }
  });
});
