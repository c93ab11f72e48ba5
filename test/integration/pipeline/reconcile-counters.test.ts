// A reconcile pass compares every counter type, not only likes: collects and
// follows as memberships, derived counters against PostgreSQL's rows and Redis,
// and views; it repairs each drift and finds nothing the second time.
import { describe, expect, it } from "vitest";
import type { Config } from "../../../src/config.js";
import type { Target } from "../../../src/domain/model/index.js";
import type { ReconcileSummary } from "../../../src/pipeline/reconcile-pass.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { createUsers, testConfig, type TestUser } from "../../support/env.js";
import { eventually, startTestPipeline } from "../../support/pipeline.js";
import { agreeWithin, createPosts, noDifferences, reconcileOn, servicesOn, useStores } from "../../support/stores.js";

let db: Database;
let redis: RedisClient;
let author: TestUser;

// A pass covers everything: start from empty tables and an empty private Redis.
useStores((s) => ({ db, redis, author } = s), { fresh: true });

const reconcile = (config: Config): Promise<ReconcileSummary> => reconcileOn({ db, redis }, config);

const counter = (target: Target, name: string) =>
  db.counter.findUnique({ where: { targetType_targetId_name: { targetType: target.type, targetId: target.id, name } } }).then((c) => Number(c?.value ?? 0n));

describe("reconcile of every counter type", () => {
  it("when collects, follows, derived counters and views drift in either store, then one pass finds each and its repairs bring both stores back", async () => {
    const config = testConfig();
    const services = servicesOn({ db, redis }, config);
    const keys = createRedisKeys(config.redisPartitions);
    const pipeline = await startTestPipeline(config);
    try {
      const [post, other] = (await createPosts({ db, redis }, config, author.id, 2)) as [Target, Target];
      const users = await createUsers(db, config, 8);
      const star: Target = { type: "user", id: (users[0] as TestUser).id };
      const fan = users[1] as TestUser;
      const fanTarget: Target = { type: "user", id: fan.id };
      const comment = await services.content.createComment(fan.id, post.id, "c", null);
      await services.content.createComment(fan.id, post.id, "r", comment.id);
      const commentTarget: Target = { type: "comment", id: comment.id };
      // Every user and the author held in Redis, so their derived counters are compared there too.
      await services.counters.read([...users.map((u): Target => ({ type: "user", id: u.id })), { type: "user", id: author.id }, commentTarget]);
      for (const u of users.slice(1)) {
        await services.memberships.join("collect", post, u.id);
        await services.memberships.join("follow", star, u.id);
        await services.memberships.join("like", other, u.id);
      }
      await services.views.record([post.id, post.id, other.id]);
      await services.views.flush();
      await agreeWithin({ db, redis }, config, [post], 30_000, "collect");
      await agreeWithin({ db, redis }, config, [star], 30_000, "follow");
      await eventually(
        async () => (await counter(post, "read")) === 2,
        30_000,
        async () => `read ${await counter(post, "read")}`,
      );
      expect(await reconcile(config)).toMatchObject({ differences: noDifferences, repairsSent: 0 });

      // Memberships: a collect lost in PostgreSQL, a stray follow there.
      await db.collect.deleteMany({ where: { targetType: "post", targetId: post.id, userId: (users[2] as TestUser).id } });
      await db.$executeRaw`INSERT INTO follows (followee_id, follower_id) VALUES (${star.id}, 999999999)`;
      // Derived counters wrong in PostgreSQL: a post's comments, a comment's replies, the author's posts, a fan's following.
      await db.counter.update({ where: { targetType_targetId_name: { targetType: "post", targetId: post.id, name: "comment" } }, data: { value: 7n } });
      await db.counter.update({ where: { targetType_targetId_name: { targetType: "comment", targetId: comment.id, name: "reply" } }, data: { value: 0n } });
      await db.counter.update({ where: { targetType_targetId_name: { targetType: "user", targetId: author.id, name: "posts" } }, data: { value: 40n } });
      await db.counter.update({ where: { targetType_targetId_name: { targetType: "user", targetId: fan.id, name: "following" } }, data: { value: 3n } });
      // Wrong in Redis only, for the write Redis last took: the author's likes received (no membership repair touches them).
      await redis.hincrby(keys.counters({ type: "user", id: author.id }), "likesReceived", 5);
      // Behind in Redis with no mirror coming (as after a crash between a commit and its mirror): another user's following.
      await redis.hset(keys.counters({ type: "user", id: (users[2] as TestUser).id }), "following", "0", "s:following", "0");
      // Views at rest, apart: PostgreSQL lost some.
      await db.counter.update({ where: { targetType_targetId_name: { targetType: "post", targetId: post.id, name: "read" } }, data: { value: 1n } });

      const first = await reconcile(config);
      expect(first.differences).toMatchObject({
        missingInDatabase: 1,
        strayInDatabase: 1,
        // Two relation counters (the post's collects, the star's followers) no longer count their rows.
        databaseCounter: 2,
        redisCounter: 0,
        views: 1,
      });
      // Four derived counters set off their rows, and the author's collects received when the lost collect's repair
      // has not recounted them yet; two off in Redis.
      expect(first.differences.derivedCounter).toBeGreaterThanOrEqual(4);
      expect(first.differences.redisDerivedCounter).toBe(2);

      await agreeWithin({ db, redis }, config, [post], 30_000, "collect");
      await agreeWithin({ db, redis }, config, [star], 30_000, "follow");
      await eventually(
        async () => (await reconcile(config)).repairsSent === 0,
        30_000,
        () => "later passes still found differences",
      );
      expect(await counter(post, "comment")).toBe(2);
      expect(await counter(commentTarget, "reply")).toBe(1);
      expect(await counter({ type: "user", id: author.id }, "posts")).toBe(2);
      expect(await counter(fanTarget, "following")).toBe(1);
      expect(await counter(post, "read")).toBe(2);
      const [authorCounts, laggard] = await services.counters.read([
        { type: "user", id: author.id },
        { type: "user", id: (users[2] as TestUser).id },
      ]);
      expect(authorCounts?.likesReceived).toBe(7);
      expect(authorCounts?.collectsReceived).toBe(await counter({ type: "user", id: author.id }, "collectsReceived"));
      expect(laggard?.following).toBe(1);
    } finally {
      await pipeline.stop();
    }
  });
});
