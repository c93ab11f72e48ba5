// A reconcile pass compares every user's list Redis holds with PostgreSQL's rows.
import { describe, expect, it } from "vitest";
import type { Config } from "../../../src/config.js";
import type { LikeableTarget } from "../../../src/domain/model/index.js";
import type { ReconcileSummary } from "../../../src/pipeline/reconcile-pass.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { testConfig, type TestUser } from "../../support/env.js";
import { eventually, startTestPipeline } from "../../support/pipeline.js";
import { createPosts, reconcileOn, servicesOn, useStores } from "../../support/stores.js";

let db: Database;
let redis: RedisClient;
let author: TestUser;

useStores((s) => ({ db, redis, author } = s), { fresh: true });

const reconcile = (config: Config): Promise<ReconcileSummary> => reconcileOn({ db, redis }, config);

const liked = (userId: bigint) => db.like.count({ where: { userId, targetType: "post" } });

describe("reconcile of users' lists", () => {
  it("when a list Redis holds lacks a post PostgreSQL has and lists one it has not, then a pass drops it and its next read is PostgreSQL's", async () => {
    const config = testConfig({ PERSIST_LINGER_MS: "20" });
    const services = servicesOn({ db, redis }, config);
    const keys = createRedisKeys(config.redisPartitions);
    const pipeline = await startTestPipeline(config);
    const user = 1000n;
    const list = keys.list("like", user);
    const page = async () =>
      ((await services.lists.pages([{ relation: "like", userId: user, first: 20, after: null }]))[0]?.entries ?? []).map((e) => e.targetId);
    try {
      const posts = await createPosts({ db, redis }, config, author.id, 6);
      const [p1, p2, , , p5, stranger] = posts as [LikeableTarget, LikeableTarget, LikeableTarget, LikeableTarget, LikeableTarget, LikeableTarget];
      for (const p of posts.slice(0, 5)) await services.memberships.join("like", p, user);
      await eventually(
        async () => (await liked(user)) === 5,
        30_000,
        async () => `${await liked(user)} likes persisted`,
      );
      const newestFirst = posts
        .slice(0, 5)
        .map((p) => p.id)
        .reverse();
      await eventually(
        async () => (await page()).join() === newestFirst.join(),
        30_000,
        async () => `list ${(await page()).join()}`,
      );
      expect(await redis.exists(list.horizon)).toBe(1);

      // A list in step with PostgreSQL: nothing to repair.
      const clean = await reconcile(config);
      expect(clean.listsChecked).toBe(1);
      expect(clean.differences.list).toBe(0);

      // Once the records of recent changes are gone (two minutes), nothing speaks for the list's entries:
      // one lost (a failover), one a post the user never liked.
      await redis.del(list.recent);
      await redis.zrem(list.entries, p2.id.toString());
      await redis.zadd(list.entries, Date.now(), stranger.id.toString());
      expect(await page()).not.toEqual(newestFirst);

      const first = await reconcile(config);
      expect(first.listsChecked).toBe(1);
      expect(first.differences.list).toBe(1);
      expect(await redis.exists(list.horizon)).toBe(0);
      expect(await page()).toEqual(newestFirst);
      expect(await redis.exists(list.horizon)).toBe(1);

      const second = await reconcile(config);
      expect(second.differences.list).toBe(0);
      expect((await page())[0]).toBe(p5.id);
      expect(await page()).toContain(p1.id);
    } finally {
      await pipeline.stop();
    }
  });

  it("when likes and unlikes go on while passes run, then no list is taken for differing", async () => {
    const config = testConfig({ PERSIST_LINGER_MS: "200" });
    const services = servicesOn({ db, redis }, config);
    const pipeline = await startTestPipeline(config);
    const users = [2001n, 2002n, 2003n];
    const read = (userId: bigint) => services.lists.pages([{ relation: "like", userId, first: 20, after: null }]);
    try {
      const posts = await createPosts({ db, redis }, config, author.id, 30);
      for (const u of users) await read(u);
      let going = true;
      const changes = (async () => {
        for (let i = 0; going; i++) {
          const post = posts[i % posts.length] as LikeableTarget;
          await Promise.all(users.map((u) => (i % 3 === 2 ? services.memberships.leave("like", post, u) : services.memberships.join("like", post, u))));
          if (i % 5 === 0) await Promise.all(users.map(read));
        }
      })();
      const passes: ReconcileSummary[] = [];
      for (let i = 0; i < 3; i++) passes.push(await reconcile(config));
      going = false;
      await changes;
      for (const p of passes) {
        expect(p.listsChecked).toBeGreaterThanOrEqual(users.length);
        expect(p.differences.list).toBe(0);
      }
    } finally {
      await pipeline.stop();
    }
  });
});
