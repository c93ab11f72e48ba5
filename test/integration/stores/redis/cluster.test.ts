// Every script against a real 3-master Redis Cluster (scripts/redis-cluster.sh).
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { LikeableTarget } from "../../../../src/domain/model.js";
import type { RedisClient } from "../../../../src/stores/redis/client.js";
import { parseCounterHash } from "../../../../src/stores/redis/counter-hash.js";
import { createCounterStore } from "../../../../src/stores/redis/counter-store.js";
import { createRedisKeys } from "../../../../src/stores/redis/keys.js";
import { createLikeStore } from "../../../../src/stores/redis/like-store.js";
import { openRedis } from "../../../support/env.js";

let cluster: RedisClient;
const keys = createRedisKeys(1024);
const base = BigInt(Date.now()) * 1000n;
// Consecutive ids fall in different partitions, so these targets spread over all three masters.
const targets: LikeableTarget[] = Array.from({ length: 24 }, (_, i) => ({ type: i % 2 ? "comment" : "post", id: base + BigInt(i) }));

beforeAll(async () => {
  cluster = await openRedis({ clusterNodes: inject("clusterNodes") });
});
afterAll(async () => {
  await cluster.quit();
});

describe("scripts on a Redis Cluster", () => {
  it("when keys are built for a target and user, then they all hash to one slot", async () => {
    for (const target of targets) {
      const slots = await Promise.all(
        [keys.counters(target), keys.outbox(target), ...keys.memberShards(target, 12345n)].map((k) => cluster.cluster("KEYSLOT", k)),
      );
      expect(new Set(slots).size).toBe(1);
    }
    const allSlots = await Promise.all(targets.map((t) => cluster.cluster("KEYSLOT", keys.counters(t))));
    const masters = new Set(allSlots.map((slot) => (slot <= 5460 ? 0 : slot <= 10922 ? 1 : 2)));
    expect(masters.size).toBe(3);
  });

  it("when targets on every master are initialised, liked, unliked and bumped, then counts are exact", async () => {
    const counters = createCounterStore(cluster, keys);
    const likes = createLikeStore(cluster, keys, 16);
    for (const t of targets) expect(await counters.init(t, { like: 0 }, 9n)).toBe(true);
    expect(await counters.init(targets[0] as LikeableTarget, { like: 5 })).toBe(false);

    await Promise.all(
      targets.flatMap((t) => Array.from({ length: 60 }, (_, u) => likes.like(t, BigInt(u + 1)))),
    );
    await Promise.all(targets.flatMap((t) => Array.from({ length: 20 }, (_, u) => likes.unlike(t, BigInt(u + 1)))));
    await Promise.all(targets.map((t) => counters.bump(t, "reply", 2)));

    const outboxLength = (await Promise.all(targets.map((t) => cluster.xlen(keys.outbox(t))))).reduce((a, b) => a + b, 0);
    expect(outboxLength).toBeGreaterThanOrEqual(targets.length * 80);
    const counts = await counters.read(targets);
    for (const [i, c] of counts.entries()) {
      expect(c?.like).toBe(40);
      expect(c?.reply).toBe(2);
      expect(parseCounterHash(await cluster.hgetall(keys.counters(targets[i] as LikeableTarget))).generation).toBeGreaterThan(0);
    }
    const liked = await likes.hasLiked(targets, 30n);
    expect(liked.every(Boolean)).toBe(true);
    const unliked = await likes.hasLiked(targets, 3n);
    expect(unliked.some(Boolean)).toBe(false);
  });

  it("when a target is unknown, then like reports it and bump leaves it missing", async () => {
    const unknown: LikeableTarget = { type: "post", id: base + 999n };
    expect(await createLikeStore(cluster, keys).like(unknown, 1n)).toEqual({ kind: "unloaded" });
    expect(await createLikeStore(cluster, keys).unlike(unknown, 1n)).toEqual({ kind: "unloaded" });
    expect(await createCounterStore(cluster, keys).bump(unknown, "like", 1)).toBe(false);
    expect(await cluster.exists(keys.counters(unknown))).toBe(0);
  });

  it("when a script is given keys of two slots, then it is refused", async () => {
    const [a, b] = [targets[0] as LikeableTarget, targets[1] as LikeableTarget];
    await expect(
      cluster.likeTarget(keys.counters(a), keys.outbox(a), keys.touched(a), keys.receipt(a), ...keys.memberShards(b, 1n), "1", 512, "like", "post", a.id.toString()),
    ).rejects.toThrow(/CROSSSLOT|same slot/);
  });
});
