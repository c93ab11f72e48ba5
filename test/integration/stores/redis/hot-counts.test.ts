// Counts kept in memory against the suite's private Redis: its invalidations are
// Redis's own (CLIENT TRACKING), heard through a TCP proxy that can hold them back.
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { counterNames, type Target } from "../../../../src/domain/model/index.js";
import type { RedisClient } from "../../../../src/stores/redis/client.js";
import { createCountInvalidations, type CountInvalidations } from "../../../../src/stores/redis/count-invalidations.js";
import { createCounterStore } from "../../../../src/stores/redis/counter-store.js";
import { HotCounts } from "../../../../src/stores/redis/hot-counts.js";
import { countersPrefix, createRedisKeys } from "../../../../src/stores/redis/keys.js";
import { createMembershipStore } from "../../../../src/stores/redis/membership-store.js";
import { openRedis, privateRedisUrl } from "../../../support/env.js";
import { startTcpProxy, type TcpProxy } from "../../../support/tcp-proxy.js";

let redis: RedisClient;
let proxy: TcpProxy;
let invalidations: CountInvalidations;
let hot: HotCounts;
const keys = createRedisKeys(1024);
let nextId = BigInt(Date.now()) * 1000n;

/** Waits until the hot counts serve, with every earlier write heard: a late invalidation would spoil a fill. */
async function servable(): Promise<void> {
  for (let i = 0; i < 200 && !hot.servable(); i++) await sleep(10);
  expect(hot.servable()).toBe(true);
  await hot.barrier();
}

beforeAll(async () => {
  redis = await openRedis();
  const url = new URL(privateRedisUrl());
  proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
  // The listener alone goes through the proxy: holding it back delays what this process hears, not its reads.
  invalidations = createCountInvalidations({
    nodes: () => [`127.0.0.1:${proxy.port}`],
    open: (node) =>
      new Redis({
        host: "127.0.0.1",
        port: Number(node.split(":")[1]),
        protocol: 2,
        lazyConnect: true,
        enableOfflineQueue: false,
        autoResubscribe: false,
        maxRetriesPerRequest: 0,
      }),
    prefix: countersPrefix,
    pingEveryMs: 20,
  });
  hot = new HotCounts({ invalidations, targetOf: (key) => keys.parseCounters(key), maxTargets: 1_000, maxStalenessMs: 100 });
});
afterAll(async () => {
  await invalidations.close();
  await proxy.close();
  await redis.quit();
});

describe("counts kept in memory", () => {
  it("when a write to a held target is heard, then the next read answers it from Redis and holds the new count", async () => {
    const store = createCounterStore(redis, keys, { hotCounts: hot });
    const post: Target = { type: "post", id: nextId++ };
    await store.init(post, { like: 0 }, 1n);
    await servable();
    const anonymous = { names: counterNames.post, relations: [], viewerId: null } as const;
    expect((await store.readout([post], anonymous))[0]?.counts.like).toBe(0);
    expect(hot.peek(post)).toBeDefined();
    await createMembershipStore(redis, keys).add("like", post, 7n);
    for (let i = 0; i < 100 && hot.peek(post); i++) await sleep(5);
    expect(hot.peek(post)).toBeUndefined();
    expect((await store.readout([post], anonymous))[0]?.counts.like).toBe(1);
  });

  it("when what the listener hears is held back and a held target grows a generation the viewer joins, then the viewer's membership is still read exactly", async () => {
    const store = createCounterStore(redis, keys, { hotCounts: hot });
    // Two members fill generation 0 of a store with shards of 2: the next member starts generation 1.
    const members = createMembershipStore(redis, keys, 2);
    const post: Target = { type: "post", id: nextId++ };
    const viewer = 99n;
    await store.init(post, { like: 0 }, 1n);
    for (let user = 1n; user <= 8n; user++) await members.add("like", post, user);
    await servable();
    const asked = { names: counterNames.post, relations: ["like"] as const, viewerId: viewer };
    expect((await store.readout([post], asked))[0]).toEqual({ counts: expect.objectContaining({ like: 8 }) as unknown, viewerIn: { like: false } });
    const held = hot.peek(post);
    expect(held?.generations.like).toBeGreaterThan(0);
    // Every shard the viewer hashes to in the held generations is full: the viewer lands in a newer one.
    proxy.stall();
    try {
      let newest = held?.generations.like ?? 0;
      for (let user = 100n; newest === (held?.generations.like ?? 0); user++) {
        await members.add("like", post, user);
        newest = Number(await redis.hget(keys.counters(post), "gen"));
      }
      await members.add("like", post, viewer);
      expect(hot.servable()).toBe(true);
      const [view] = await store.readout([post], asked);
      expect(view?.viewerIn.like).toBe(true);
    } finally {
      proxy.resume();
    }
  });
});
