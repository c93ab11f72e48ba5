// Collects, follows and views through the pipeline: every counter agrees in
// Redis and PostgreSQL after a burst, survives Redis losing everything, and a
// crash between a commit and Redis hearing of it.
import { describe, expect, it } from "vitest";
import type { Config } from "../../../src/config.js";
import { counterNames, derivedCounters, type Counts, type Target } from "../../../src/domain/model/index.js";
import type { Services } from "../../../src/domain/services.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createCounterStore } from "../../../src/stores/redis/counter-store.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { createRebuildStore } from "../../../src/stores/redis/rebuild-store.js";
import { burstDeadlines, createUsers, emptyRedis, testConfig, type TestUser } from "../../support/env.js";
import { eventually, startTestPipeline } from "../../support/pipeline.js";
import { agreeWithin, createPosts, servicesOn, useStores, loadIntoRedis } from "../../support/stores.js";

let db: Database;
let redis: RedisClient;
let author: TestUser;

useStores((s) => ({ db, redis, author } = s));

/** What PostgreSQL's own rows say each derived counter of a user should be. */
async function truthOf(user: bigint): Promise<Counts> {
  const [row] = await db.$queryRaw<{ posts: bigint; likes: bigint; collects: bigint; following: bigint }[]>`
    SELECT (SELECT count(*) FROM posts WHERE author_id = ${user}) AS posts,
           (SELECT count(*) FROM likes l JOIN posts p ON l.target_type = 'post' AND l.target_id = p.id WHERE p.author_id = ${user})
             + (SELECT count(*) FROM likes l JOIN comments c ON l.target_type = 'comment' AND l.target_id = c.id WHERE c.author_id = ${user}) AS likes,
           (SELECT count(*) FROM collects k JOIN posts p ON k.target_type = 'post' AND k.target_id = p.id WHERE p.author_id = ${user}) AS collects,
           (SELECT count(*) FROM follows WHERE follower_id = ${user}) AS following`;
  return { posts: Number(row?.posts), likesReceived: Number(row?.likes), collectsReceived: Number(row?.collects), following: Number(row?.following) };
}

/** Every counter of the target's type as PostgreSQL's counter rows hold it (0 when absent). */
async function databaseCounts(target: Target): Promise<Counts> {
  const rows = await db.counter.findMany({ where: { targetType: target.type, targetId: target.id } });
  return Object.fromEntries(counterNames[target.type].map((name) => [name, Number(rows.find((r) => r.name === name)?.value ?? 0n)]));
}

/** Every counter of the target's type as Redis holds it (0 when absent), or null when Redis does not hold the target. */
async function redisCounts(config: Config, target: Target): Promise<Counts | null> {
  const [held] = await createCounterStore(redis, createRedisKeys(config.redisPartitions)).read([target]);
  return held ? Object.fromEntries(counterNames[target.type].map((name) => [name, held[name] ?? 0])) : null;
}

/** Waits until every counter of every target agrees between the stores, and users' derived counters with PostgreSQL's rows. */
async function countersAgree(config: Config, targets: readonly Target[]): Promise<void> {
  const differs = async (): Promise<string | null> => {
    for (const target of targets) {
      const [inRedis, inDatabase] = await Promise.all([redisCounts(config, target), databaseCounts(target)]);
      if (inRedis && JSON.stringify(inRedis) !== JSON.stringify(inDatabase))
        return `${target.type} ${target.id}: Redis ${JSON.stringify(inRedis)}, PostgreSQL ${JSON.stringify(inDatabase)}`;
      if (target.type === "user") {
        const truth = await truthOf(target.id);
        const wrong = derivedCounters.user.filter((name) => truth[name] !== inDatabase[name]);
        if (wrong.length) return `user ${target.id}: rows say ${JSON.stringify(truth)}, counters ${JSON.stringify(inDatabase)}`;
      }
    }
    return null;
  };
  await eventually(
    async () => (await differs()) === null,
    30_000,
    async () => String(await differs()),
  );
}

/** A burst of likes, collects, follows and views over `posts` and `users`, with some of each undone. */
async function burst(services: Services, posts: readonly Target[], users: readonly TestUser[]): Promise<void> {
  const calls: Promise<unknown>[] = [];
  for (const [i, user] of users.entries()) {
    for (const [j, post] of posts.entries()) {
      if ((i + j) % 2 === 0) calls.push(services.memberships.join("like", post, user.id));
      if ((i + j) % 3 === 0) calls.push(services.memberships.join("collect", post, user.id));
    }
    for (const other of users.slice(0, 6)) if (other !== user) calls.push(services.memberships.join("follow", { type: "user", id: other.id }, user.id));
    calls.push(services.views.record(posts.map((p) => p.id)));
  }
  await Promise.all(calls);
  const undo: Promise<unknown>[] = [];
  for (const [i, user] of users.entries()) {
    if (i % 4 === 0) undo.push(services.memberships.leave("collect", posts[0] as Target, user.id));
    if (i % 5 === 0 && i > 0) undo.push(services.memberships.leave("follow", { type: "user", id: (users[0] as TestUser).id }, user.id));
    if (i % 3 === 0) undo.push(services.memberships.leave("like", posts[1] as Target, user.id));
  }
  await Promise.all(undo);
  await services.views.flush();
}

describe("collects, follows and views persisted", () => {
  it("when likes, collects, follows and views burst, then Redis and PostgreSQL agree on every counter and every relation", async () => {
    const config = testConfig(burstDeadlines);
    const services = servicesOn({ db, redis }, config);
    const pipeline = await startTestPipeline(config);
    try {
      const posts = await createPosts({ db, redis }, config, author.id, 6);
      const users = await createUsers(db, config, 30);
      const userTargets: Target[] = users.map((u) => ({ type: "user", id: u.id }));
      // Loaded into Redis first (as a write or the warmer would), so their credits move there too.
      await loadIntoRedis(services, [...userTargets, { type: "user", id: author.id }]);
      await burst(services, posts, users);
      await agreeWithin({ db, redis }, config, posts);
      await agreeWithin({ db, redis }, config, posts, 30_000, "collect");
      await agreeWithin({ db, redis }, config, userTargets.slice(0, 6), 30_000, "follow");
      await countersAgree(config, [...posts, ...userTargets, { type: "user", id: author.id }]);
      expect((await databaseCounts(posts[2] as Target)).read).toBe(30);
      expect((await redisCounts(config, { type: "user", id: author.id }))?.collectsReceived).toBeGreaterThan(0);
    } finally {
      await pipeline.stop();
    }
  });

  it("when Redis loses everything after a burst, then every kind of count and membership comes back from PostgreSQL", async () => {
    const config = testConfig(burstDeadlines);
    const services = servicesOn({ db, redis }, config);
    const pipeline = await startTestPipeline(config);
    try {
      const posts = await createPosts({ db, redis }, config, author.id, 4);
      const users = await createUsers(db, config, 12);
      const comment = await services.content.createComment(author.id, (posts[0] as Target).id, "first", null);
      await services.content.createComment((users[0] as TestUser).id, (posts[0] as Target).id, "reply", comment.id);
      await services.memberships.join("like", { type: "comment", id: comment.id }, (users[1] as TestUser).id);
      const targets: Target[] = [
        ...posts,
        { type: "comment", id: comment.id },
        ...users.map((u): Target => ({ type: "user", id: u.id })),
        { type: "user", id: author.id },
      ];
      await loadIntoRedis(services, targets);
      await burst(services, posts, users);
      await countersAgree(config, targets);
      const viewer = (users[3] as TestUser).id;
      // Counters never touched read 0 whether absent (a new target) or written as 0 (a rebuilt one).
      const seen = async () =>
        (await services.counters.readout(targets, viewer)).map((v, i) => ({
          counts: Object.fromEntries(counterNames[(targets[i] as Target).type].map((name) => [name, v.counts[name] ?? 0])),
          viewerIn: v.viewerIn,
        }));
      const before = await seen();

      await emptyRedis(redis);
      expect(await seen()).toEqual(before);
      // And they go on from there, exactly.
      await services.memberships.join("collect", posts[0] as Target, author.id);
      await services.memberships.join("follow", { type: "user", id: (users[0] as TestUser).id }, author.id);
      await services.views.record([(posts[0] as Target).id]);
      await services.views.flush();
      await countersAgree(config, targets);
      await agreeWithin({ db, redis }, config, posts, 30_000, "collect");
    } finally {
      await pipeline.stop();
    }
  });

  it("when posts and users leave Redis again and again while their changes are in flight, then nothing is lost or counted twice", async () => {
    const config = testConfig({ PERSIST_BATCH_SIZE: "50", PERSIST_LINGER_MS: "100", ...burstDeadlines });
    const services = servicesOn({ db, redis }, config);
    const rebuilds = createRebuildStore(redis, createRedisKeys(config.redisPartitions));
    const pipeline = await startTestPipeline(config);
    try {
      const posts = await createPosts({ db, redis }, config, author.id, 3);
      const users = await createUsers(db, config, 40);
      const followed: Target[] = users.slice(0, 3).map((u) => ({ type: "user", id: u.id }));
      let dropping = true;
      const drops = (async () => {
        while (dropping) {
          await Promise.all([...posts, ...followed].map((t) => rebuilds.drop(t)));
          await new Promise((r) => setTimeout(r, 150));
        }
      })();
      for (let round = 0; round < 4; round++) {
        await Promise.all(
          users.flatMap((u, i) => [
            services.memberships.join("collect", posts[(i + round) % 3] as Target, u.id),
            ...(i > 2 ? [services.memberships.join("follow", followed[(i + round) % 3] as Target, u.id)] : []),
            services.views.record(posts.map((p) => p.id)),
          ]),
        );
        await services.views.flush();
        await Promise.all(users.filter((_, i) => i % 3 === round % 3).map((u) => services.memberships.leave("collect", posts[round % 3] as Target, u.id)));
      }
      dropping = false;
      await drops;
      // Loaded again, as the next write (or the warmer, after a read) would.
      await loadIntoRedis(services, [...posts, ...followed]);
      await agreeWithin({ db, redis }, config, posts, 30_000, "collect");
      await agreeWithin({ db, redis }, config, followed, 30_000, "follow");
      await countersAgree(config, [...posts, ...followed]);
      // Every reported view counted once: 4 rounds of 40 users viewing each post.
      expect((await redisCounts(config, posts[0] as Target))?.read).toBe(160);
    } finally {
      await pipeline.stop();
    }
  });

  it("when a worker dies after committing a follow but before Redis heard of it, then the follower's following comes right from the redelivery", async () => {
    const config = testConfig(burstDeadlines);
    const services = servicesOn({ db, redis }, config);
    let crashes = 0;
    const pipeline = await startTestPipeline(config, {
      afterDatabaseCommit: async () => {
        if (crashes === 0) {
          crashes++;
          throw new Error("injected crash after the commit, before Redis");
        }
      },
    });
    try {
      const [star, fan] = (await createUsers(db, config, 2)) as [TestUser, TestUser];
      const fanTarget: Target = { type: "user", id: fan.id };
      // The fan's counters are in Redis, so a lost mirror would leave them stale there.
      await loadIntoRedis(services, [fanTarget]);
      expect((await services.counters.read([fanTarget]))[0]?.following).toBe(0);
      await services.memberships.join("follow", { type: "user", id: star.id }, fan.id);
      await eventually(
        async () => crashes === 1,
        10_000,
        () => "the batch never committed",
      );
      await countersAgree(config, [fanTarget, { type: "user", id: star.id }]);
      expect((await services.counters.read([fanTarget]))[0]?.following).toBe(1);
      expect((await databaseCounts(fanTarget)).following).toBe(1);
    } finally {
      await pipeline.stop();
    }
  });
});
