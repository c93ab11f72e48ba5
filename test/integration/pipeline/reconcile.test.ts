// A reconcile pass finds where Redis and PostgreSQL differ and repairs exactly that.
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import type { Config } from "../../../src/config.js";
import type { LikeableTarget } from "../../../src/domain/model/index.js";
import type { ReconcileSummary } from "../../../src/pipeline/reconcile-pass.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createRedisKeys, versionField } from "../../../src/stores/redis/keys.js";
import { emptyRedis, itOnSingle, testConfig, type TestUser } from "../../support/env.js";
import { eventually, startTestPipeline } from "../../support/pipeline.js";
import { startTestApi } from "../../support/api.js";
import { agreeWithin, createPosts, noDifferences, reconcileOn, servicesOn, useStores } from "../../support/stores.js";

let db: Database;
let redis: RedisClient;
let author: TestUser;

// A pass covers everything: start from empty like tables and an empty private Redis.
useStores((s) => ({ db, redis, author } = s), { fresh: true });

const reconcile = (config: Config): Promise<ReconcileSummary> => reconcileOn({ db, redis }, config);

const likeCounter = (t: LikeableTarget) =>
  db.counter.findUnique({ where: { targetType_targetId_name: { targetType: t.type, targetId: t.id, name: "like" } } }).then((c) => Number(c?.value ?? 0n));

describe("reconcile", () => {
  it("when rows are deleted, stray rows inserted and a counter set wrong, then one pass repairs all three and a second finds nothing", async () => {
    const config = testConfig();
    const services = servicesOn({ db, redis }, config);
    const pipeline = await startTestPipeline(config);
    try {
      const posts = await createPosts({ db, redis }, config, author.id, 3);
      const [a, b, c] = posts as [LikeableTarget, LikeableTarget, LikeableTarget];
      for (const p of posts) await Promise.all(Array.from({ length: 20 }, (_, u) => services.memberships.join("like", p, BigInt(u + 1))));
      // A post only PostgreSQL holds, with a wrong counter.
      const [unheld] = await createPosts({ db, redis }, config, author.id, 1);
      await db.$executeRaw`INSERT INTO likes (target_type, target_id, user_id) SELECT 'post', ${unheld!.id}, g FROM generate_series(1, 5) g`;
      await agreeWithin({ db, redis }, config, posts);

      await db.like.deleteMany({ where: { targetType: "post", targetId: a.id, userId: { in: [1n, 2n, 3n] } } });
      await db.$executeRaw`INSERT INTO likes (target_type, target_id, user_id) VALUES ('post', ${b.id}, 900), ('post', ${b.id}, 901)`;
      await db.counter.update({ where: { targetType_targetId_name: { targetType: "post", targetId: c.id, name: "like" } }, data: { value: 999n } });
      await redis.del(`cnt:{${Number(unheld!.id % BigInt(config.redisPartitions))}}:post:${unheld!.id}`);

      const first = await reconcile(config);
      // The author's likes received no longer count the rows either: the membership repairs recount them, and when
      // they have not been applied by the time the pass reaches the author's counters, so does a repair of its own.
      const { derivedCounter, ...membership } = first.differences;
      expect(membership).toEqual({ ...noDifferences, missingInDatabase: 3, strayInDatabase: 2, databaseCounter: 4, derivedCounter: undefined });
      expect(derivedCounter).toBeLessThanOrEqual(1);
      expect(first.repairsSent).toBe(4 + derivedCounter);
      expect(first.inFlight.count).toBe(0);
      await agreeWithin({ db, redis }, config, posts);
      await eventually(
        async () => (await likeCounter(unheld!)) === 5,
        10_000,
        async () => `counter ${await likeCounter(unheld!)}`,
      );

      const second = await reconcile(config);
      expect(second.differences).toEqual(noDifferences);
      expect(second.repairsSent).toBe(0);
    } finally {
      await pipeline.stop();
    }
  });

  it("when a pass runs during a burst of likes, then it repairs nothing that was not broken", async () => {
    const config = testConfig({ PERSIST_LINGER_MS: "300" });
    const services = servicesOn({ db, redis }, config);
    const pipeline = await startTestPipeline(config);
    try {
      const posts = await createPosts({ db, redis }, config, author.id, 10);
      let user = 0n;
      let bursting = true;
      const burst = (async () => {
        // Paced, so each pass compares about as many members whatever the machine's speed.
        while (bursting) {
          await Promise.all(Array.from({ length: 100 }, (_, i) => services.memberships.join("like", posts[i % 10] as LikeableTarget, ++user)));
          await sleep(50);
        }
      })();
      const summaries: ReconcileSummary[] = [];
      for (let i = 0; i < 3; i++) summaries.push(await reconcile(config));
      bursting = false;
      await burst;
      await agreeWithin({ db, redis }, config, posts);
      for (const s of summaries) {
        expect(s.differences).toEqual(noDifferences);
        expect(s.repairsSent).toBe(0);
      }
      expect(summaries.reduce((n, s) => n + s.inFlight.count, 0)).toBeGreaterThan(0);
      expect(await db.like.count({ where: { targetType: "post", targetId: { in: posts.map((p) => p.id) } } })).toBe(Number(user));
    } finally {
      await pipeline.stop();
    }
  });

  itOnSingle(
    "when 1,000,000 likes over 10,000 posts sit in PostgreSQL, then a full pass finishes, reports its throughput and keeps its memory bounded",
    async () => {
      const config = testConfig();
      // Only these targets: posts and counters of earlier tests go too (the author stays, with nothing to count).
      await db.$executeRaw`TRUNCATE posts, comments, likes, collects, follows, relation_versions, view_totals, target_epochs, counters`;
      await emptyRedis(redis);
      // Zipf-like: post k gets about 1/k of the likes; ids far above the suite's own posts.
      await db.$executeRaw`
      INSERT INTO likes (target_type, target_id, user_id)
      SELECT 'post', 5000000000 + p, u
      FROM generate_series(1, 10000) p,
           LATERAL generate_series(1, GREATEST(10, (103000 / p)::int)) u`;
      const likes = await db.like.count();
      await db.$executeRaw`
      INSERT INTO counters (target_type, target_id, name, value)
      SELECT target_type, target_id, 'like', count(*) FROM likes GROUP BY 1, 2`;
      // Some counters drift, to be found.
      await db.$executeRaw`UPDATE counters SET value = value + 1 WHERE target_id % 1000 = 7`;

      const heapBefore = process.memoryUsage().heapUsed;
      let heapPeak = heapBefore;
      const sampler = setInterval(() => (heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed)), 50);
      const summary = await reconcile(config).finally(() => clearInterval(sampler));
      const growthMb = (heapPeak - heapBefore) / 1e6;
      console.log(
        `reconcile of ${likes} likes over ${summary.targetsChecked} targets: ${summary.seconds.toFixed(1)} s, ${Math.round(summary.targetsChecked / summary.seconds)} targets/s, heap growth ${growthMb.toFixed(0)} MB`,
      );

      expect(likes).toBeGreaterThanOrEqual(1_000_000);
      expect(summary.targetsChecked).toBe(10_000);
      expect(summary.differences.databaseCounter).toBe(10);
      expect(growthMb).toBeLessThan(300);
      await db.$executeRaw`TRUNCATE posts, comments, likes, collects, follows, relation_versions, view_totals, target_epochs, counters`;
    },
    300_000,
  );
});

describe("reconcile of big targets", () => {
  it("when a target has more members than a pass loads at once, then it is compared in pieces and drift on both sides is repaired exactly", async () => {
    const config = testConfig({ RECONCILE_MEMBER_CHUNK: "500" });
    const services = servicesOn({ db, redis }, config);
    const keys = createRedisKeys(config.redisPartitions);
    const pipeline = await startTestPipeline(config);
    try {
      // 3,000 likers, loaded into Redis by a rebuild from PostgreSQL: six times the chunk.
      const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
      await redis.del(keys.counters(post));
      await db.$executeRaw`INSERT INTO likes (target_type, target_id, user_id) SELECT 'post', ${post.id}, g FROM generate_series(1, 3000) g`;
      await db.$executeRaw`INSERT INTO counters (target_type, target_id, name, value) VALUES ('post', ${post.id}, 'like', 3000)
        ON CONFLICT (target_type, target_id, name) DO UPDATE SET value = 3000`;
      expect(await services.counters.rebuild(post)).toBe(true);
      await agreeWithin({ db, redis }, config, [post]);

      // Drift both ways, each bigger than one repair may carry, and both counters off.
      await db.$executeRaw`DELETE FROM likes WHERE target_type = 'post' AND target_id = ${post.id} AND user_id <= 700`;
      await db.$executeRaw`INSERT INTO likes (target_type, target_id, user_id) SELECT 'post', ${post.id}, g FROM generate_series(100001, 100600) g`;
      await redis.hincrby(keys.counters(post), "like", 5);

      const first = await reconcile(config);
      expect(first.walked).toBe(1);
      // The direct inserts also left the author's likes received off their rows (see above).
      const { derivedCounter, ...membership } = first.differences;
      expect(membership).toEqual({
        ...noDifferences,
        missingInDatabase: 700,
        strayInDatabase: 600,
        databaseCounter: 1,
        redisCounter: 1,
        derivedCounter: undefined,
      });
      expect(derivedCounter).toBeLessThanOrEqual(1);
      // 700 and 600 users in repairs of at most 500: 2 + 2, and the Redis recount.
      expect(first.repairsSent).toBe(5 + derivedCounter);
      await agreeWithin({ db, redis }, config, [post]);
      expect(await likeCounter(post)).toBe(3000);
      expect(await db.like.count({ where: { targetType: "post", targetId: post.id, userId: { gt: 100000n } } })).toBe(0);

      const second = await reconcile(config);
      expect(second.walked).toBe(1);
      expect(second.differences).toEqual(noDifferences);
      expect(second.repairsSent).toBe(0);
    } finally {
      await pipeline.stop();
    }
  });
});

describe("targets a pass cannot compare", () => {
  it("when Redis lost a change PostgreSQL persisted (a failover), then the pass takes the target out of Redis and the next read rebuilds it with the change", async () => {
    const config = testConfig();
    const services = servicesOn({ db, redis }, config);
    const keys = createRedisKeys(config.redisPartitions);
    const pipeline = await startTestPipeline(config);
    try {
      const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
      for (let u = 1n; u <= 20n; u++) await services.memberships.join("like", post, u);
      await agreeWithin({ db, redis }, config, [post]);

      // The replica that took over never got user 20's like: not in its shard, not counted, an older version.
      await Promise.all(keys.memberShards("like", post, 20n).map((shard) => redis.srem(shard, "20")));
      await redis.hincrby(keys.counters(post), "like", -1);
      await redis.hincrby(keys.counters(post), versionField, -1);

      const summary = await reconcile(config);
      expect(summary.rebuiltBehind).toEqual({ count: 1, sample: [`post:${post.id}`] });
      expect(summary.inFlight.count).toBe(0);
      // PostgreSQL, which has the change, is not repaired from the Redis that lacks it.
      expect(summary.differences).toEqual(noDifferences);
      expect(summary.repairsSent).toBe(0);
      expect(await redis.exists(keys.counters(post))).toBe(0);

      const [counts] = await services.counters.read([post]);
      expect(counts?.like).toBe(20);
      expect((await services.memberships.join("like", post, 20n)).changed).toBe(false);
      await agreeWithin({ db, redis }, config, [post]);
      // The unchanged like, in the rebuild's window, stamped a change of its own: persisted before the pipeline stops.
      await eventually(
        async () => (await reconcile(config)).inFlight.count === 0,
        30_000,
        () => `post ${post.id} still in flight`,
      );
      expect(await db.like.count({ where: { targetType: "post", targetId: post.id } })).toBe(20);
    } finally {
      await pipeline.stop();
    }
  });

  it("when a target stays in flight across passes, then each pass reports it and the third reports it stuck; once persisted it is neither", async () => {
    const config = testConfig();
    const services = servicesOn({ db, redis }, config);
    const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
    // No pipeline running: the like waits in the outbox, Redis ahead of PostgreSQL, as when its change is dead-lettered.
    await services.memberships.join("like", post, 1n);
    const id = `post:${post.id}`;

    const passes: ReconcileSummary[] = [];
    for (let i = 0; i < 3; i++) passes.push(await reconcile(config));
    for (const p of passes) {
      expect(p.inFlight).toEqual({ count: 1, sample: [id] });
      expect(p.inFlight.sample).toEqual([id]);
    }
    expect(passes.map((p) => p.stuck.count)).toEqual([0, 0, 1]);
    expect(passes[2]?.stuck.sample).toEqual([id]);

    const pipeline = await startTestPipeline(config);
    try {
      await agreeWithin({ db, redis }, config, [post]);
    } finally {
      await pipeline.stop();
    }
    const settled = await reconcile(config);
    expect(settled.inFlight.count).toBe(0);
    expect(settled.stuck.count).toBe(0);
  });
});

describe("cold targets", () => {
  it("when a target sits idle past the limit, then a pass takes it out of Redis and its next use rebuilds it whole", async () => {
    const config = testConfig({ COLD_TARGET_IDLE_SECONDS: "1" });
    const services = servicesOn({ db, redis }, config);
    const pipeline = await startTestPipeline(config);
    try {
      const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
      await Promise.all(Array.from({ length: 40 }, (_, u) => services.memberships.join("like", post, BigInt(u + 1))));
      await agreeWithin({ db, redis }, config, [post]);
      await new Promise((r) => setTimeout(r, 2_500));
      const summary = await reconcile(config);
      expect(summary.evicted).toBeGreaterThanOrEqual(1);
      expect(await redis.exists(`cnt:{${Number(post.id % BigInt(config.redisPartitions))}}:post:${post.id}`)).toBe(0);

      const [counts] = await services.counters.read([post]);
      expect(counts?.like).toBe(40);
      expect((await services.memberships.join("like", post, 1n)).changed).toBe(false);
      expect((await services.memberships.leave("like", post, 2n)).changed).toBe(true);
      await agreeWithin({ db, redis }, config, [post]);
    } finally {
      await pipeline.stop();
    }
  });

  it("when one post is read (from the process's memory too) and another is not, then passes take out only the unread one once idle past the limit, and their own reads do not count as use", async () => {
    const config = testConfig({ COLD_TARGET_IDLE_SECONDS: "2" });
    const api = await startTestApi({ COLD_TARGET_IDLE_SECONDS: "2" });
    try {
      const [read, unread] = (await createPosts({ db, redis }, config, author.id, 2)) as [LikeableTarget, LikeableTarget];
      const held = async () =>
        Promise.all([read, unread].map((post) => redis.exists(`cnt:{${Number(post.id % BigInt(config.redisPartitions))}}:post:${post.id}`)));
      const readPost = () => api.gql("query($id: ID!) { post(id: $id) { counts { likes } } }", { id: read.id.toString() });
      await readPost();
      await new Promise((r) => setTimeout(r, 1_500));
      // Read again from the counts the process keeps in memory: Redis sees nothing of it but the use record.
      await readPost();
      await api.uses.flush();
      await reconcile(config);
      expect(await held()).toEqual([1, 1]);
      // The pass read both hashes; that is no use: the unread post is idle since it was made, past the limit now.
      await new Promise((r) => setTimeout(r, 1_800));
      // Read once more just before the pass: its use stays within the limit however long the first pass took
      // (uses count whole seconds; on a loaded machine a read 1.8 s and a pass before had passed it).
      await readPost();
      await api.uses.flush();
      await reconcile(config);
      expect(await held()).toEqual([1, 0]);
      // Past the limit by more than a whole second, as uses are counted.
      await new Promise((r) => setTimeout(r, 3_500));
      await reconcile(config);
      expect(await held()).toEqual([0, 0]);
    } finally {
      await api.close();
    }
  });
});
