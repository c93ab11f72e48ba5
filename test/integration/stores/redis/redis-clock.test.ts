// Redis's clock as a process measures it, against a real Redis: write deadlines set
// on it whether this process's clock runs ahead or behind, and writes refused with
// a message naming the clock when its round trips leave it unknown.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { LikeableTarget } from "../../../../src/domain/model/index.js";
import type { RedisClient } from "../../../../src/stores/redis/client.js";
import { createCounterStore } from "../../../../src/stores/redis/counter-store.js";
import { createRedisKeys } from "../../../../src/stores/redis/keys.js";
import { createMembershipStore } from "../../../../src/stores/redis/membership-store.js";
import { RedisClockUnknownError, watchRedisClock } from "../../../../src/stores/redis/redis-clock.js";
import { openRedis, privateRedisUrl } from "../../../support/env.js";
import { startTcpProxy } from "../../../support/tcp-proxy.js";

const keys = createRedisKeys(1024);
let redis: RedisClient;
let nextId = BigInt(Date.now()) * 1000n + 500n;

async function knownPost(): Promise<LikeableTarget> {
  const target: LikeableTarget = { type: "post", id: nextId++ };
  await createCounterStore(redis, keys).init(target, { like: 0 }, 1n);
  return target;
}

/** Redis's clock now, in milliseconds since the epoch. */
async function redisNowMs(): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Number(micros) / 1000;
}

beforeAll(async () => {
  redis = await openRedis();
});
afterEach(() => {
  vi.restoreAllMocks();
});
afterAll(async () => {
  await redis.quit();
});

describe("Redis's clock", () => {
  for (const offsetMs of [2_000, -2_000]) {
    it(`when this process's clock runs ${Math.abs(offsetMs)} ms ${offsetMs > 0 ? "behind" : "ahead of"} Redis's, then the offset is measured and a like's deadline is set on Redis's clock`, async () => {
      const realNow = Date.now.bind(Date);
      vi.spyOn(Date, "now").mockImplementation(() => realNow() - offsetMs);
      const client = await openRedis();
      const clock = watchRedisClock(client);
      try {
        for (let i = 0; i < 3; i++) await clock.sample();
        const bounds = clock.bounds();
        expect(bounds).not.toBeNull();
        expect(bounds?.lowerMs).toBeGreaterThan(offsetMs - 20);
        expect(bounds?.upperMs).toBeLessThan(offsetMs + 20);
        expect(clock.problem()).toBeNull();
        // The deadline of a write answered in a second is a second from now on Redis's clock.
        const deadline = clock.deadlineFor(Date.now() + 1_000);
        const redisNow = await redisNowMs();
        expect(deadline).toBeGreaterThan(redisNow + 1_000 - 40);
        expect(deadline).toBeLessThan(redisNow + 1_000 + 20);
        // With the process's clock behind, a deadline set on it would have passed on Redis's already.
        const post = await knownPost();
        expect(await createMembershipStore(client, keys).add("like", post, 7n, Date.now() + 1_000)).toMatchObject({ changed: true, counts: { like: 1 } });
      } finally {
        clock.close();
        await client.quit();
      }
    });
  }

  it("when this process's wall clock is stepped after the samples, then deadlines move with it before any new sample", async () => {
    const client = await openRedis();
    const clock = watchRedisClock(client);
    try {
      for (let i = 0; i < 3; i++) await clock.sample();
      const realNow = Date.now.bind(Date);
      vi.spyOn(Date, "now").mockImplementation(() => realNow() + 5_000);
      const deadline = clock.deadlineFor(Date.now() + 1_000);
      const redisNow = await redisNowMs();
      expect(deadline).toBeGreaterThan(redisNow + 1_000 - 40);
      expect(deadline).toBeLessThan(redisNow + 1_000 + 20);
    } finally {
      clock.close();
      await client.quit();
    }
  });

  it("when every round trip to Redis took long, then its clock is unknown: writes are refused with a message naming the clock, and a quick sample makes it known again", async () => {
    const url = new URL(privateRedisUrl());
    const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
    const client = await openRedis({ url: proxy.url, commandTimeoutMs: 2_000 });
    const clock = watchRedisClock(client);
    try {
      proxy.hold();
      const sampling = clock.sample();
      await new Promise((resolve) => setTimeout(resolve, 400));
      proxy.resume();
      await sampling;
      expect(clock.answering()).toBe(true);
      expect(clock.problem()).toMatch(/Redis's clock only within ±\d+ ms/);
      const post = await knownPost();
      const refused = createMembershipStore(client, keys).add("like", post, 8n, Date.now() + 1_000);
      await expect(refused).rejects.toBeInstanceOf(RedisClockUnknownError);
      await expect(refused).rejects.toThrow(/round trips to Redis were slow/);
      expect(await redis.hget(keys.counters(post), "like")).toBe("0");

      await clock.sample();
      expect(clock.problem()).toBeNull();
      expect(await createMembershipStore(client, keys).add("like", post, 8n, Date.now() + 1_000)).toMatchObject({ changed: true });
    } finally {
      proxy.resume();
      clock.close();
      client.disconnect();
      await proxy.close();
    }
  });
});
