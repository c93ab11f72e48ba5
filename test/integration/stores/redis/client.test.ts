// The tick's shared pipeline: requests of one tick travel together, and one that fails fails alone.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Redis } from "ioredis";
import { inTickPipeline, type RedisClient } from "../../../../src/stores/redis/client.js";
import { openRedis } from "../../../support/env.js";

let redis: RedisClient;

beforeAll(async () => {
  redis = await openRedis();
});
afterAll(async () => {
  await redis.quit();
});

describe("tick pipeline", () => {
  it("when one request's commands throw while queued, then it alone fails and the others of the tick are answered", async () => {
    const key = `tick:${Date.now()}`;
    const [first, broken, last] = await Promise.allSettled([
      inTickPipeline(redis as Redis, (p) => void p.set(key, "1").get(key)),
      inTickPipeline(redis as Redis, () => {
        throw new Error("bad arguments");
      }),
      inTickPipeline(redis as Redis, (p) => void p.incr(key)),
    ]);
    expect(first).toEqual({ status: "fulfilled", value: ["OK", "1"] });
    expect(broken).toMatchObject({ status: "rejected", reason: new Error("bad arguments") });
    expect(last).toEqual({ status: "fulfilled", value: [2] });
  });

  it("when a command of one request fails in Redis, then only that request is rejected", async () => {
    const key = `tick:${Date.now()}:hash`;
    await redis.hset(key, "f", "v");
    const [wrongType, fine] = await Promise.allSettled([
      inTickPipeline(redis as Redis, (p) => void p.incr(key)),
      inTickPipeline(redis as Redis, (p) => void p.hget(key, "f")),
    ]);
    expect(wrongType).toMatchObject({ status: "rejected", reason: { message: expect.stringMatching(/WRONGTYPE/) } });
    expect(fine).toEqual({ status: "fulfilled", value: ["v"] });
  });
});
