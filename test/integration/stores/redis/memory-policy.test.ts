// Redis near its maxmemory: the least recently used targets leave as idle eviction
// takes them (only those PostgreSQL holds whole), new loads are refused with a code,
// and targets Redis holds are still liked. The private Redis's maxmemory is set here
// and put back after each test.
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { createMemoryPolicy } from "../../../../src/domain/memory-policy.js";
import type { LikeableTarget, Target } from "../../../../src/domain/model/index.js";
import { DomainError, ErrorCode } from "../../../../src/errors.js";
import type { Database } from "../../../../src/stores/postgres/database.js";
import { createSnapshotStore } from "../../../../src/stores/postgres/snapshot-store.js";
import type { RedisClient } from "../../../../src/stores/redis/client.js";
import { createCounterStore } from "../../../../src/stores/redis/counter-store.js";
import { createRedisKeys } from "../../../../src/stores/redis/keys.js";
import { startIndexFence } from "../../../../src/stores/redis/index-fence.js";
import { createMemberIndexStore, memberIndexesOf, type MemberIndexes } from "../../../../src/stores/redis/member-index-store.js";
import { createMemoryStore } from "../../../../src/stores/redis/memory-store.js";
import { createRebuildStore } from "../../../../src/stores/redis/rebuild-store.js";
import { startTestApi } from "../../../support/api.js";
import { codesOf, createUsers, emptyRedis, testConfig, type TestUser } from "../../../support/env.js";
import { createPosts, servicesOn, useStores } from "../../../support/stores.js";

let db: Database;
let redis: RedisClient;
let author: TestUser;

useStores((s) => ({ db, redis, author } = s));

const usedBytes = async () => Number(/^used_memory:(\d+)/m.exec(await redis.info("memory"))?.[1]);
/** Sets maxmemory so that Redis is `fraction` full now. */
const fillTo = async (fraction: number) => {
  const max = Math.ceil((await usedBytes()) / fraction);
  await redis.config("SET", "maxmemory", String(max));
  return max;
};
const codeOf = (error: unknown) => (error instanceof DomainError ? error.code : String(error));

/** `count` posts Redis holds that PostgreSQL never heard of (ids far above the suite's), each a small counter hash. */
async function fakeTargets(from: bigint, count: number): Promise<Target[]> {
  const config = testConfig();
  const counters = createCounterStore(redis, createRedisKeys(config.redisPartitions));
  const targets = Array.from({ length: count }, (_, i): Target => ({ type: "post", id: from + BigInt(i) }));
  for (let i = 0; i < targets.length; i += 1_000)
    await Promise.all(targets.slice(i, i + 1_000).map((t) => counters.init(t, { like: 0, read: 0, comment: 0, collect: 0 })));
  return targets;
}

afterEach(async () => {
  await redis.config("SET", "maxmemory", "0");
});

describe("Redis's memory policy", () => {
  it("when Redis passes the eviction mark, then the coldest targets leave until it is under the low mark, and recent or unpersisted ones stay", async () => {
    await emptyRedis(redis);
    const config = testConfig();
    const keys = createRedisKeys(config.redisPartitions);
    const cold = await fakeTargets(8_000_000_000n, 20_000);
    // Use records count whole seconds.
    await sleep(2_100);
    const recent = await fakeTargets(9_000_000_000n, 200);
    const [liked] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
    // No pipeline runs: this like stays in flight, so its post may not leave.
    await servicesOn({ db, redis }, config).memberships.join("like", liked, 5n);
    const max = await fillTo(0.95);

    // Each round takes the coldest tenth of the hashes it samples, as by default. A burst of 50 rounds
    // may take every cold target, so reaching the low mark does not hang on what else the suite left in Redis.
    const policy = createMemoryPolicy({
      store: createMemoryStore(redis, keys),
      rebuilds: createRebuildStore(redis, keys),
      snapshots: createSnapshotStore(db),
      evictPerRound: 400,
      sampleSize: 4_000,
    });
    await expect(policy.admit().catch(codeOf)).resolves.toBe(ErrorCode.OVER_CAPACITY);
    await policy.settled();

    expect(await usedBytes()).toBeLessThan(max * 0.7);
    const held = async (targets: readonly Target[]) => (await Promise.all(targets.map((t) => redis.exists(keys.counters(t))))).filter(Boolean).length;
    expect(await held(cold)).toBeLessThan(cold.length);
    expect(await held(recent)).toBe(recent.length);
    expect(await held([liked])).toBe(1);
    await sleep(1_100);
    await expect(policy.admit()).resolves.toBeUndefined();
  });

  it("when the coldest records are of targets that must stay (changes not yet persisted) or of users, then later rounds look past them and evict what is behind", async () => {
    await emptyRedis(redis);
    const config = testConfig();
    const keys = createRedisKeys(config.redisPartitions);
    // Posts of one partition, so every round looks at the same few records first.
    const partitionOf = (t: Target) => keys.use(t).key;
    const first: Target = { type: "post", id: 8_100_000_000n };
    const same: Target[] = [];
    for (let id = first.id; same.length < 108; id++) {
      const t: Target = { type: "post", id };
      if (partitionOf(t) === partitionOf(first)) same.push(t);
    }
    const counters = createCounterStore(redis, keys);
    await Promise.all(same.map((t) => counters.init(t, { like: 0, read: 0, comment: 0, collect: 0 })));
    const [stuck, behind] = [same.slice(0, 8), same.slice(8)];
    // The eight coldest carry a change PostgreSQL never applied; records of users (as an earlier version kept) come first of all.
    for (const t of stuck) await redis.hset(keys.counters(t), "ver", String(Date.now() * 1000));
    await redis.zadd(partitionOf(first), ...stuck.flatMap((t, i) => [10 + i, keys.use(t).member]), ...behind.flatMap((t) => [100, keys.use(t).member]));
    await redis.zadd(partitionOf(first), ...Array.from({ length: 8 }, (_, i) => [1, keys.use({ type: "user", id: BigInt(i + 1) }).member]).flat());
    await fillTo(0.95);

    const policy = createMemoryPolicy({
      store: createMemoryStore(redis, keys),
      rebuilds: createRebuildStore(redis, keys),
      snapshots: createSnapshotStore(db),
      evictPerRound: 8,
      sampleSize: 8 * config.redisPartitions,
    });
    await policy.admit().catch(codeOf);
    await policy.settled();
    const held = async (targets: readonly Target[]) => (await Promise.all(targets.map((t) => redis.exists(keys.counters(t))))).filter(Boolean).length;
    expect(await held(stuck)).toBe(stuck.length);
    expect(await held(behind)).toBe(0);
    expect(await redis.zrangebyscore(partitionOf(first), 0, 9)).toEqual([]);
  });

  it("when Redis is near its maxmemory, then a like of a post it does not hold answers OVER_CAPACITY and a like of one it holds is taken", async () => {
    await emptyRedis(redis);
    const api = await startTestApi();
    try {
      const [viewer] = (await createUsers(db, api.config, 1)) as [TestUser];
      const [loaded, evicted] = (await createPosts({ db, redis }, api.config, author.id, 2)) as [LikeableTarget, LikeableTarget];
      expect(await createRebuildStore(redis, createRedisKeys(api.config.redisPartitions)).evict(evicted, 0n)).toBe("evicted");
      // Redis holds nothing that may leave (the post it holds has a like not yet persisted): it stays near its limit.
      await servicesOn({ db, redis }, api.config).memberships.join("like", loaded, 5n);
      await fillTo(0.95);
      const like = "mutation($id: ID!) { likePost(postId: $id) { changed post { counts { likes } } } }";
      const refused = await api.gql(like, { id: evicted.id.toString() }, viewer.token);
      expect(codesOf(refused)).toEqual([ErrorCode.OVER_CAPACITY]);
      const taken = await api.gql<{ likePost: { changed: boolean } }>(like, { id: loaded.id.toString() }, viewer.token);
      expect(codesOf(taken)).toEqual([]);
      expect(taken.data?.likePost.changed).toBe(true);
      expect(await createRebuildStore(redis, createRedisKeys(api.config.redisPartitions)).held([loaded, evicted])).toEqual(["held", "absent"]);
      // Anonymous counts of the post Redis does not hold are still answered, from PostgreSQL.
      const anonymous = await api.gql("query($id: ID!) { post(id: $id) { counts { likes } } }", { id: evicted.id.toString() });
      expect(codesOf(anonymous)).toEqual([]);
    } finally {
      await api.close();
    }
  });

  it("when Redis is still over the mark with no target to evict, then idle member indexes go, and a like not yet persisted stays in its user's pending record", async () => {
    await emptyRedis(redis);
    const config = testConfig();
    const keys = createRedisKeys(config.redisPartitions);
    // Registered as the API processes of this file are: indexes complete under the registry's generation.
    const fence = await startIndexFence(redis, keys.writers());
    const indexes = memberIndexesOf(redis, keys) as MemberIndexes;
    const store = createMemberIndexStore(redis, indexes);
    const users = Array.from({ length: 3_000 }, (_, i) => 8_500_000_000n + BigInt(i));
    // Loaded indexes of likes PostgreSQL holds (as after a read), 300 posts each, and a like not yet persisted.
    const liked = Array.from({ length: 300 }, (_, i) => BigInt(i + 1));
    for (let i = 0; i < users.length; i += 500) {
      await Promise.all(
        users.slice(i, i + 500).map(async (user) => {
          await store.begin("like", "post", user);
          await store.complete("like", "post", user, liked, false);
        }),
      );
    }
    const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
    const holder = users[0] as bigint;
    await servicesOn({ db, redis }, config).memberships.join("like", post, holder);
    const pending = indexes.pendingKey("like", "post", holder);
    expect(await redis.hkeys(pending)).toEqual([post.id.toString()]);
    const max = await fillTo(0.95);

    const policy = createMemoryPolicy({
      store: createMemoryStore(redis, keys),
      rebuilds: createRebuildStore(redis, keys),
      snapshots: createSnapshotStore(db),
      sampleSize: 4_000,
      evictPerRound: 1_000,
      indexIdleSeconds: 0,
    });
    await expect(policy.admit().catch(codeOf)).resolves.toBe(ErrorCode.OVER_CAPACITY);
    await policy.settled();
    expect(await usedBytes()).toBeLessThan(max * 0.7);
    const left = await Promise.all(users.map((user) => redis.exists(indexes.key("like", "post", user))));
    // At least a round's worth went; how many rounds reach the low mark depends on the allocator's accounting.
    expect(left.filter(Boolean).length).toBeLessThanOrEqual(users.length - 1_000);
    expect(await redis.hkeys(pending)).toEqual([post.id.toString()]);
    await fence?.close();
  });
});
