import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { counterNames, type LikeableTarget, type Relation, type Target } from "../../../../src/domain/model/index.js";
import type { RedisClient } from "../../../../src/stores/redis/client.js";
import { createCounterStore } from "../../../../src/stores/redis/counter-store.js";
import { createRedisKeys, membershipFanout, membershipGenerations } from "../../../../src/stores/redis/keys.js";
import { TargetFullError } from "../../../../src/errors.js";
import { createMembershipStore } from "../../../../src/stores/redis/membership-store.js";
import { relationLayouts } from "../../../../src/stores/redis/relations.js";
import { burstDeadlines, openRedis } from "../../../support/env.js";

let redis: RedisClient;
const keys = createRedisKeys(1024);
let nextId = BigInt(Date.now()) * 1000n;
const newPost = (): LikeableTarget => ({ type: "post", id: nextId++ });

async function knownPost(): Promise<LikeableTarget> {
  const target = newPost();
  await createCounterStore(redis, keys).init(target, { like: 0 }, 1n);
  return target;
}

async function memberCount(target: Target, newest: number, relation: Relation = "like"): Promise<number> {
  let total = 0;
  for (let g = 0; g <= newest; g++) {
    const sizes = await Promise.all(keys.generationShards(relation, target, g).map((k) => redis.scard(k)));
    total += sizes.reduce((a, b) => a + b, 0);
  }
  return total;
}

beforeAll(async () => {
  redis = await openRedis({ commandTimeoutMs: Number(burstDeadlines.REDIS_COMMAND_TIMEOUT_MS) });
});
afterAll(async () => {
  await redis.quit();
});

describe("membership store on a real Redis", () => {
  it("when a target is not in Redis, then a change reports it and writes nothing", async () => {
    const target = newPost();
    expect(await createMembershipStore(redis, keys).add("like", target, 7n)).toEqual({ kind: "unloaded" });
    expect(await createMembershipStore(redis, keys).add("collect", target, 7n)).toEqual({ kind: "unloaded" });
    expect(await redis.exists(keys.counters(target), ...keys.memberShards("like", target, 7n), ...keys.memberShards("collect", target, 7n))).toBe(0);
  });

  it("when a user likes and collects one post, then each relation keeps its own members, count and events", async () => {
    const store = createMembershipStore(redis, keys);
    const target = await knownPost();
    const before = (await redis.xrange(keys.outbox(target), "-", "+")).length;
    expect(await store.add("like", target, 42n)).toMatchObject({ changed: true, counts: { like: 1 } });
    expect(await store.add("collect", target, 42n)).toMatchObject({ changed: true, counts: { like: 1, collect: 1 } });
    expect(await store.add("collect", target, 42n)).toMatchObject({ changed: false, counts: { like: 1, collect: 1 } });
    expect(await store.remove("like", target, 42n)).toMatchObject({ changed: true, counts: { like: 0, collect: 1 } });
    expect(await store.holds("collect", [target], 42n)).toEqual([true]);
    expect(await store.holds("like", [target], 42n)).toEqual([false]);
    const events = (await redis.xrange(keys.outbox(target), "-", "+")).slice(before).map(([, f]) => `${f[f.indexOf("r") + 1]}:${f[f.indexOf("s") + 1]}`);
    expect(events).toEqual(["l:1", "c:1", "l:0"]);
  });

  it("when 300 users follow one user concurrently and 100 of them unfollow, then followers count 200 and each change's version grows", async () => {
    const store = createMembershipStore(redis, keys, 16);
    const user: Target = { type: "user", id: nextId++ };
    await createCounterStore(redis, keys).init(user, { followers: 0 });
    const joined = await Promise.all(Array.from({ length: 300 }, (_, i) => store.add("follow", user, BigInt(i + 1))));
    await Promise.all(Array.from({ length: 100 }, (_, i) => store.remove("follow", user, BigInt(i + 1))));
    expect(joined.filter((r) => r.kind === "applied" && r.changed)).toHaveLength(300);
    const hash = await redis.hgetall(keys.counters(user));
    expect(hash.followers).toBe("200");
    expect(await memberCount(user, Number(hash[relationLayouts.follow.generationField] ?? 0), "follow")).toBe(200);
    const follows = (await redis.xrange(keys.outbox(user), "-", "+")).filter(
      ([, f]) => f[f.indexOf("i") + 1] === user.id.toString() && f[f.indexOf("s") + 1] === "1",
    );
    const versions = follows.map(([, f]) => `${f[f.indexOf("e") + 1]}:${f[f.indexOf("v") + 1]}`);
    expect(new Set(versions).size).toBe(300);
  });

  it("when a user likes twice, then only the first call changes anything", async () => {
    const store = createMembershipStore(redis, keys);
    const target = await knownPost();
    const first = await store.add("like", target, 42n);
    const second = await store.add("like", target, 42n);
    expect(first).toMatchObject({ kind: "applied", changed: true, counts: { like: 1 } });
    expect(second).toMatchObject({ kind: "applied", changed: false, counts: { like: 1 } });
    expect(await redis.hget(keys.counters(target), "author")).toBe("1");
    const unlikeOnce = await store.remove("like", target, 42n);
    const unlikeAgain = await store.remove("like", target, 42n);
    expect(unlikeOnce).toMatchObject({ changed: true, counts: { like: 0 } });
    expect(unlikeAgain).toMatchObject({ changed: false, counts: { like: 0 } });
  });

  it("when likes change membership, then each change appends one outbox event with a growing version, and no-ops append none", async () => {
    const store = createMembershipStore(redis, keys);
    const target = await knownPost();
    const outbox = keys.outbox(target);
    const before = await redis.xrange(outbox, "-", "+");
    await store.add("like", target, 11n);
    await store.add("like", target, 11n);
    await store.remove("like", target, 11n);
    await store.remove("like", target, 11n);
    await store.add("like", target, 11n);
    const added = (await redis.xrange(outbox, "-", "+")).slice(before.length);
    const events = added
      .map(([, fields]) => Object.fromEntries(Array.from({ length: fields.length / 2 }, (_, i) => [fields[2 * i], fields[2 * i + 1]] as [string, string])))
      .filter((e) => e.i === target.id.toString());
    expect(events.map((e) => [e.t, e.u, e.s, e.a])).toEqual([
      ["post", "11", "1", "1"],
      ["post", "11", "0", "1"],
      ["post", "11", "1", "1"],
    ]);
    const versions = events.map((e) => BigInt(e.v as string));
    expect(versions[1]! > versions[0]! && versions[2]! > versions[1]!).toBe(true);
    expect(Math.abs(Number(events[0]?.ts) - Date.now())).toBeLessThan(60_000);
    expect(await redis.hget(keys.counters(target), "ver")).toBe(events[2]?.v);
  });

  it("when 300 distinct users like one target concurrently, then the count is 300", async () => {
    const store = createMembershipStore(redis, keys);
    const target = await knownPost();
    const results = await Promise.all(Array.from({ length: 300 }, (_, i) => store.add("like", target, BigInt(i + 1))));
    expect(results.filter((r) => r.kind === "applied" && r.changed)).toHaveLength(300);
    expect(await redis.hget(keys.counters(target), "like")).toBe("300");
  });

  it("when one user likes 50 times at once, then the count moves once", async () => {
    const store = createMembershipStore(redis, keys);
    const target = await knownPost();
    const results = await Promise.all(Array.from({ length: 50 }, () => store.add("like", target, 99n)));
    expect(results.filter((r) => r.kind === "applied" && r.changed)).toHaveLength(1);
    expect(await redis.hget(keys.counters(target), "like")).toBe("1");
  });

  it("when likes and unlikes interleave at random, then the count equals the members", async () => {
    const store = createMembershipStore(redis, keys);
    const target = await knownPost();
    // Small shards force generations to grow during the run.
    const tight = createMembershipStore(redis, keys, 8);
    const ops = Array.from({ length: 2_000 }, () => {
      const user = BigInt(1 + Math.floor(Math.random() * 150));
      const pick = Math.random();
      return pick < 0.4 ? store.remove("like", target, user) : pick < 0.7 ? tight.add("like", target, user) : store.add("like", target, user);
    });
    await Promise.all(ops);
    const hash = await redis.hgetall(keys.counters(target));
    const members = await memberCount(target, Number(hash.gen ?? 0));
    expect(Number(hash.like)).toBe(members);
    const liked = await Promise.all(Array.from({ length: 150 }, async (_, i) => (await store.holds("like", [target], BigInt(i + 1)))[0]));
    expect(liked.filter(Boolean)).toHaveLength(members);
  });

  it("when 12,000 users like one post, then no key holds more than 10,000 members and every like counts", async () => {
    const store = createMembershipStore(redis, keys);
    const target = await knownPost();
    for (let start = 1; start <= 12_000; start += 1_000) {
      await Promise.all(Array.from({ length: 1_000 }, (_, i) => store.add("like", target, BigInt(start + i))));
    }
    const hash = await redis.hgetall(keys.counters(target));
    const newest = Number(hash.gen ?? 0);
    expect(newest).toBeGreaterThan(0);
    let largest = 0;
    let total = 0;
    for (let g = 0; g <= newest; g++) {
      const sizes = await Promise.all(keys.generationShards("like", target, g).map((k) => redis.scard(k)));
      largest = Math.max(largest, ...sizes);
      total += sizes.reduce((a, b) => a + b, 0);
    }
    expect(largest).toBeLessThanOrEqual(512);
    expect(largest).toBeLessThanOrEqual(10_000);
    expect(total).toBe(12_000);
    expect(Number(hash.like)).toBe(12_000);
    // Shards stay in Redis's compact integer-set encoding.
    expect(await redis.object("ENCODING", keys.memberShard("like", target, 1n, 0))).toBe("intset");
    // Every member is found again, whichever generation holds it.
    const sample = [1n, 500n, 5_000n, 12_000n];
    expect(
      await store.holds(
        "like",
        sample.map(() => target),
        1n,
      ),
    ).toEqual([true, true, true, true]);
    const notLiked = await store.holds("like", [target], 12_001n);
    expect(notLiked).toEqual([false]);
  });

  it("when every generation is full, then a like is refused without writing", async () => {
    const target = await knownPost();
    const tiny = createMembershipStore(redis, keys, 1);
    let refused: unknown;
    let added = 0;
    for (let user = 1n; user < 20_000n && !refused; user++) {
      try {
        const r = await tiny.add("like", target, user);
        if (r.kind === "applied" && r.changed) added++;
      } catch (error) {
        refused = error;
      }
    }
    expect(refused).toBeInstanceOf(TargetFullError);
    expect(Number(await redis.hget(keys.counters(target), "like"))).toBe(added);
    expect(added).toBeLessThanOrEqual((membershipFanout ** membershipGenerations - 1) / (membershipFanout - 1));
  });

  it("when the script gets a malformed user id, then it refuses before any write", async () => {
    const target = await knownPost();
    const shards = keys.memberShards("like", target, 5n);
    const { tag, generationField } = relationLayouts.like;
    const reply = await redis.addMember(
      keys.counters(target),
      keys.outbox(target),
      keys.touched(target, "like"),
      keys.receipt(target),
      ...shards,
      "5; DROP",
      512,
      "like",
      "post",
      target.id.toString(),
      tag,
      generationField,
      ...counterNames.post,
    );
    expect(reply).toEqual([-3]);
    expect(await redis.hget(keys.counters(target), "like")).toBe("0");
  });
});
