import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RedisClient } from "../../../../src/stores/redis/client.js";
import {
  checkDurability,
  checkMemoryPolicy,
  checkRedisVersion,
  EvictingRedisError,
  readDurability,
  VolatileRedisError,
} from "../../../../src/stores/redis/durability.js";
import { openRedis } from "../../../support/env.js";

let redis: RedisClient;

function capture() {
  const lines: { level: number; msg: string }[] = [];
  const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line) as { level: number; msg: string }) });
  return { logger, warnings: () => lines.filter((l) => l.level === 40).map((l) => l.msg) };
}

beforeAll(async () => {
  redis = await openRedis();
});
afterAll(async () => {
  await redis.quit();
});

describe("Redis durability at start", () => {
  it("when Redis has neither AOF nor replicas, then production refuses to start unless the loss is accepted, and elsewhere it warns", async () => {
    // The suite's Redis runs without AOF and without replicas.
    expect(await readDurability(redis)).toEqual({ aof: false, replicated: false, fewestReplicas: 0 });
    const strict = capture();
    await expect(checkDurability(redis, { policy: "durable", refuse: true, logger: strict.logger })).rejects.toBeInstanceOf(VolatileRedisError);

    const accepted = capture();
    await checkDurability(redis, { policy: "volatile", refuse: true, logger: accepted.logger });
    expect(accepted.warnings().join()).toContain("REDIS_DURABILITY=volatile");

    const development = capture();
    await checkDurability(redis, { policy: "durable", refuse: false, logger: development.logger });
    expect(development.warnings().join()).toMatch(/without AOF and without replicas/);
  });

  it("when the suite's Redis is asked its version, then it is new enough to start on", async () => {
    await expect(checkRedisVersion(redis)).resolves.toBeUndefined();
  });

  it("when Redis appends to an AOF, then it starts without a warning, in production too", async () => {
    await redis.config("SET", "appendonly", "yes");
    try {
      expect((await readDurability(redis)).aof).toBe(true);
      const quiet = capture();
      await checkDurability(redis, { policy: "durable", refuse: true, logger: quiet.logger });
      expect(quiet.warnings()).toEqual([]);
    } finally {
      await redis.config("SET", "appendonly", "no");
    }
  });

  it("when Redis's maxmemory-policy evicts, then production refuses to start naming the fix, and elsewhere it warns; noeviction starts quietly", async () => {
    const quiet = capture();
    expect(await checkMemoryPolicy(redis, { refuse: true, logger: quiet.logger })).toEqual(["noeviction"]);
    expect(quiet.warnings()).toEqual([]);
    await redis.config("SET", "maxmemory-policy", "volatile-lru");
    try {
      await expect(checkMemoryPolicy(redis, { refuse: true, logger: capture().logger })).rejects.toThrow(
        new EvictingRedisError(
          "Redis's maxmemory-policy is volatile-lru: it may evict changes not yet persisted and half a target. Set maxmemory-policy noeviction (redis.conf, or CONFIG SET maxmemory-policy noeviction).",
        ),
      );
      const development = capture();
      await checkMemoryPolicy(redis, { refuse: false, logger: development.logger });
      expect(development.warnings().join()).toMatch(/maxmemory-policy is volatile-lru/);
    } finally {
      await redis.config("SET", "maxmemory-policy", "noeviction");
    }
  });
});
