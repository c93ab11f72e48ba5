// What a reconcile pass may take for drift, and what it must leave alone: changes made
// while it reads a target, and writes a failover took from Redis but PostgreSQL holds.
import { describe, expect, it } from "vitest";
import type { LikeableTarget, Repair } from "../../../src/domain/model.js";
import type { RedisReconcileStore } from "../../../src/domain/ports.js";
import { runReconcile } from "../../../src/pipeline/reconcile-pass.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { createDatabaseReconcileStore } from "../../../src/stores/postgres/reconcile-store.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { createRebuildStore } from "../../../src/stores/redis/rebuild-store.js";
import { createRedisReconcileStore } from "../../../src/stores/redis/reconcile-store.js";
import { testConfig, type TestUser } from "../../support/env.js";
import { eventually, startTestPipeline } from "../../support/pipeline.js";
import { agreeWithin, createPosts, servicesOn, useStores } from "../../support/stores.js";

let db: Database;
let redis: RedisClient;
let author: TestUser;

useStores((s) => ({ db, redis, author } = s), { fresh: true });

const noDifferences = { missingInDatabase: 0, strayInDatabase: 0, databaseCounter: 0, redisCounter: 0, derivedCounter: 0, redisDerivedCounter: 0, views: 0 };

const likers = (post: LikeableTarget) =>
  db.like.findMany({ where: { targetType: "post", targetId: post.id }, select: { userId: true }, orderBy: { userId: "asc" } }).then((rows) => rows.map((r) => r.userId));

/** Waits until PostgreSQL holds exactly `users` as the post's likers. */
const persisted = (post: LikeableTarget, users: readonly bigint[]) =>
  eventually(async () => (await likers(post)).join(",") === users.join(","), 30_000, async () => `likers ${(await likers(post)).join(",")}`);

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
