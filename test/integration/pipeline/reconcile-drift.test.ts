// What a reconcile pass may take for drift, and what it must leave alone: changes made
// while it reads a target, and writes a failover took from Redis but PostgreSQL holds.
import { describe, expect, it } from "vitest";
import type { Config } from "../../../src/config.js";
import type { LikeableTarget, Repair } from "../../../src/domain/model/index.js";
import type { RedisReconcileStore } from "../../../src/domain/ports/index.js";
import { runReconcile, type ReconcileSummary } from "../../../src/pipeline/reconcile-pass.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { createDatabaseReconcileStore } from "../../../src/stores/postgres/database-reconcile-store.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createRedisKeys, versionField } from "../../../src/stores/redis/keys.js";
import { createRebuildStore } from "../../../src/stores/redis/rebuild-store.js";
import { createRedisReconcileStore } from "../../../src/stores/redis/redis-reconcile-store.js";
import { testConfig, type TestUser } from "../../support/env.js";
import { eventually, startTestPipeline } from "../../support/pipeline.js";
import { agreeWithin, createPosts, noDifferences, reconcileOn, servicesOn, useStores } from "../../support/stores.js";

let db: Database;
let redis: RedisClient;
let author: TestUser;

useStores((s) => ({ db, redis, author } = s), { fresh: true });

const reconcile = (config: Config): Promise<ReconcileSummary> => reconcileOn({ db, redis }, config);

const likers = (post: LikeableTarget) =>
  db.like
    .findMany({ where: { targetType: "post", targetId: post.id }, select: { userId: true }, orderBy: { userId: "asc" } })
    .then((rows) => rows.map((r) => r.userId));

/** Waits until PostgreSQL holds exactly `users` as the post's likers. */
const persisted = (post: LikeableTarget, users: readonly bigint[]) =>
  eventually(
    async () => (await likers(post)).join(",") === users.join(","),
    30_000,
    async () => `likers ${(await likers(post)).join(",")}`,
  );

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => BigInt(from + i));

describe("a pass racing changes", () => {
  it("when a change is made and persisted between a pass's reads of a target, then the pass neither drops the target nor repairs it", async () => {
    const config = testConfig({ PERSIST_LINGER_MS: "20" });
    const services = servicesOn({ db, redis }, config);
    const keys = createRedisKeys(config.redisPartitions);
    const pipeline = await startTestPipeline(config);
    try {
      const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
      for (const u of range(1, 5)) await services.memberships.join("like", post, u);
      await agreeWithin({ db, redis }, config, [post]);

      // Right after the pass reads Redis, another user likes the post and PostgreSQL applies it before the pass goes on.
      const redisStore = createRedisReconcileStore(redis, keys);
      let next = 100n;
      const raced: bigint[] = [];
      const racing: RedisReconcileStore = {
        ...redisStore,
        async survey(items, memberLimit) {
          const found = await redisStore.survey(items, memberLimit);
          if (items.some((i) => i.target.type === "post" && i.target.id === post.id)) {
            const user = ++next;
            await services.memberships.join("like", post, user);
            raced.push(user);
            await persisted(post, [...range(1, 5), ...raced]);
          }
          return found;
        },
      };
      const sent: Repair[] = [];
      const summary = await runReconcile({
        redis: racing,
        database: createDatabaseReconcileStore(db),
        rebuilds: createRebuildStore(redis, keys),
        publish: async (repairs) => void sent.push(...repairs),
        mirrorGraceMs: 0,
      });

      expect(raced.length).toBeGreaterThan(0);
      expect(summary.rebuiltBehind.count).toBe(0);
      expect(summary.behindKept.count).toBe(0);
      expect(summary.differences).toEqual(noDifferences);
      expect(sent).toEqual([]);
      expect(await redis.exists(keys.counters(post))).toBe(1);
      await agreeWithin({ db, redis }, config, [post]);
    } finally {
      await pipeline.stop();
    }
  });
});

// Twenty members: loaded whole, or with a chunk of 8 walked in pieces (src/pipeline/reconcile-walk.ts).
const compared = [
  { how: "loaded whole", chunk: "10000", walked: 0 },
  { how: "walked in pieces", chunk: "8", walked: 1 },
];

describe.each(compared)("writes a failover lost, targets $how", ({ chunk, walked }) => {
  it("when Redis lost a like PostgreSQL persisted and another user then likes the target, then the pass keeps the persisted like and Redis gets it back", async () => {
    const config = testConfig({ PERSIST_LINGER_MS: "20", RECONCILE_MEMBER_CHUNK: chunk });
    const services = servicesOn({ db, redis }, config);
    const keys = createRedisKeys(config.redisPartitions);
    const pipeline = await startTestPipeline(config);
    try {
      const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
      for (const u of range(1, 20)) await services.memberships.join("like", post, u);
      await agreeWithin({ db, redis }, config, [post]);

      // The replica that took over never got user 20's like: not in its shard, not counted, an older version.
      await Promise.all(keys.memberShards("like", post, 20n).map((shard) => redis.srem(shard, "20")));
      await redis.hincrby(keys.counters(post), "like", -1);
      await redis.hincrby(keys.counters(post), versionField, -1);
      // A later change stamps a version above the lost one, so the versions alone no longer tell.
      expect((await services.memberships.join("like", post, 21n)).changed).toBe(true);
      await persisted(post, range(1, 21));

      const summary = await reconcile(config);
      expect(summary.differences).toEqual(noDifferences);
      expect(summary.repairsSent).toBe(0);
      expect(summary.rebuiltBehind).toEqual({ count: 1, sample: [`post:${post.id}`] });
      expect(summary.walked > 0).toBe(walked > 0);

      const [counts] = await services.counters.read([post]);
      expect(counts?.like).toBe(21);
      expect((await services.memberships.join("like", post, 20n)).changed).toBe(false);
      await agreeWithin({ db, redis }, config, [post]);
      expect(await likers(post)).toEqual(range(1, 21));
    } finally {
      await pipeline.stop();
    }
  });

  it("when Redis lost an unlike PostgreSQL persisted and another user then likes the target, then the pass does not like it again", async () => {
    const config = testConfig({ PERSIST_LINGER_MS: "20", RECONCILE_MEMBER_CHUNK: chunk });
    const services = servicesOn({ db, redis }, config);
    const keys = createRedisKeys(config.redisPartitions);
    const pipeline = await startTestPipeline(config);
    try {
      const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
      for (const u of range(1, 20)) await services.memberships.join("like", post, u);
      await agreeWithin({ db, redis }, config, [post]);
      const [shard] = keys.memberShards("like", post, 20n);
      expect((await services.memberships.leave("like", post, 20n)).changed).toBe(true);
      await persisted(post, range(1, 19));

      // The replica that took over never got the unlike: user 20 back in its shard, counted, an older version.
      await redis.sadd(shard as string, "20");
      await redis.hincrby(keys.counters(post), "like", 1);
      await redis.hincrby(keys.counters(post), versionField, -1);
      expect((await services.memberships.join("like", post, 21n)).changed).toBe(true);
      await persisted(post, [...range(1, 19), 21n]);

      const summary = await reconcile(config);
      expect(summary.differences).toEqual(noDifferences);
      expect(summary.repairsSent).toBe(0);
      expect(summary.rebuiltBehind).toEqual({ count: 1, sample: [`post:${post.id}`] });
      expect(summary.walked > 0).toBe(walked > 0);

      // Answered from PostgreSQL at once, and loaded back whole by its next write (or the warmer).
      const [counts] = await services.counters.read([post]);
      expect(counts?.like).toBe(20);
      expect(await services.counters.rebuild(post)).toBe(true);
      await agreeWithin({ db, redis }, config, [post]);
      expect(await likers(post)).toEqual([...range(1, 19), 21n]);
    } finally {
      await pipeline.stop();
    }
  });
});
