// The service's Redis client: the tick's shared pipeline (requests of one tick
// travel together, and one that fails fails alone), and what happens to commands
// when a connection is lost or goes silent.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Redis } from "ioredis";
import { inTickPipeline, type RedisClient } from "../../../../src/stores/redis/client.js";
import { openRedis, privateRedisUrl, uniqueTag } from "../../../support/env.js";
import { startTcpProxy } from "../../../support/tcp-proxy.js";

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

describe("connections lost or silent", () => {
  it("when a command timed out and its connection is then lost, then it is not re-sent on the new one, while a command still awaited is", async () => {
    const url = new URL(privateRedisUrl());
    const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
    const client = await openRedis({ url: proxy.url, commandTimeoutMs: 1_000 });
    client.on("error", () => undefined);
    const [abandoned, awaited] = [`resend:${uniqueTag()}:abandoned`, `resend:${uniqueTag()}:awaited`];
    try {
      proxy.stall();
      await expect(client.incr(abandoned)).rejects.toThrow("Command timed out");
      const pending = client.incr(awaited);
      await new Promise((resolve) => setTimeout(resolve, 50));
      // The held bytes go with the connection; the client connects again and re-sends what it still waits for.
      proxy.reset();
      proxy.resume();
      expect(await pending).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await redis.get(abandoned)).toBeNull();
    } finally {
      proxy.resume();
      client.disconnect();
      await proxy.close();
    }
  });

  it("when a connection goes silent with commands waiting, then the client drops it and answers on a new one within seconds", async () => {
    const url = new URL(privateRedisUrl());
    const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
    const client = await openRedis({ url: proxy.url, commandTimeoutMs: 300 });
    client.on("error", () => undefined);
    try {
      expect(await client.ping()).toBe("PONG");
      const accepted = proxy.accepted;
      // A half-open connection: nothing comes back, and nothing says so.
      proxy.stall();
      await expect(client.ping()).rejects.toThrow("Command timed out");
      // Only the connection's silence can tell it is dead: the client connects again.
      for (let i = 0; i < 50 && proxy.accepted === accepted; i++) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(proxy.accepted).toBeGreaterThan(accepted);
      proxy.resume();
      expect(await client.ping()).toBe("PONG");
    } finally {
      proxy.resume();
      client.disconnect();
      await proxy.close();
    }
  });
});
