// A read never waits for a target to be loaded into Redis: whatever Redis does not
// hold is answered from PostgreSQL (counts and the viewer's memberships, two
// statements for a page), paid from the caller's budget, and handed to the warmer,
// which loads many targets per PostgreSQL snapshot in the background. Writes still
// load the target they change, a few at a time per process, each within its deadline.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Config } from "../../../src/config.js";
import { createCatalog, lookupTarget } from "../../../src/domain/catalog.js";
import type { LikeableTarget, Target } from "../../../src/domain/model/index.js";
import type { SnapshotStore } from "../../../src/domain/ports/index.js";
import { createTargetLoader } from "../../../src/domain/target-loads.js";
import { createWarmer } from "../../../src/domain/warmer.js";
import { ErrorCode } from "../../../src/errors.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { createCommentStore } from "../../../src/stores/postgres/comment-store.js";
import { createPostStore } from "../../../src/stores/postgres/post-store.js";
import { createSnapshotStore } from "../../../src/stores/postgres/snapshot-store.js";
import { createUserStore } from "../../../src/stores/postgres/user-store.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createCounterStore } from "../../../src/stores/redis/counter-store.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { createRebuildStore } from "../../../src/stores/redis/rebuild-store.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { codesOf, createUsers, emptyRedis, openRedis, privateRedisUrl, testConfig, type TestUser } from "../../support/env.js";
import { startTcpProxy } from "../../support/tcp-proxy.js";
import { eventually, startTestPipeline } from "../../support/pipeline.js";
import { agreeWithin, createPosts, useStores } from "../../support/stores.js";

let db: Database;
let redis: RedisClient;
let author: TestUser;

useStores((s) => ({ db, redis, author } = s));

const postsQuery = "query($ids: [ID!]!) { posts(ids: $ids) { id counts { likes } viewerHasLiked } }";
type PostsAnswer = { posts: ({ counts: { likes: number }; viewerHasLiked: boolean } | null)[] };
const likesOf = (response: { data?: PostsAnswer | null }) => response.data?.posts.map((p) => p?.counts.likes ?? null);
const likedOf = (response: { data?: PostsAnswer | null }) => response.data?.posts.map((p) => p?.viewerHasLiked ?? null);
const held = async (config: Config, targets: readonly Target[]) =>
  (await createRebuildStore(redis, createRedisKeys(config.redisPartitions)).held(targets)).map((holding) => holding === "held");

/** A loader on the real stores whose snapshots report how many targets each read, and how many ran at once. */
function countedLoader(config: Config) {
  const keys = createRedisKeys(config.redisPartitions);
  const real = createSnapshotStore(db);
  const counted = { now: 0, most: 0, snapshots: [] as number[] };
  const snapshots: SnapshotStore = {
    ...real,
    async read(targets) {
      counted.most = Math.max(counted.most, ++counted.now);
      counted.snapshots.push(targets.length);
      try {
        return await real.read(targets);
      } finally {
        counted.now--;
      }
    },
  };
  const catalog = createCatalog({ users: createUserStore(db), posts: createPostStore(db), comments: createCommentStore(db) });
  const loader = createTargetLoader({
    rebuildStore: createRebuildStore(redis, keys),
    snapshots,
    counterStore: createCounterStore(redis, keys),
    lookup: lookupTarget(catalog),
  });
  return { loader, counted };
}

describe("the warmer", () => {
  it("when reads hand in 250 posts Redis does not hold, then they are loaded a batch per snapshot, one snapshot at a time, and all end in Redis", async () => {
    const config = testConfig();
    const posts = await createPosts({ db, redis }, config, author.id, 250);
    await emptyRedis(redis);
    const { loader, counted } = countedLoader(config);
    const warmer = createWarmer({ loader, batchSize: 100, perSecond: 10_000 });
    // Handed in twice, as two readers would: each post waits once.
    warmer.want(posts);
    warmer.want(posts.slice(0, 50));
    await warmer.idle();
    expect(counted.snapshots).toEqual([100, 100, 50]);
    expect(counted.most).toBe(1);
    expect(await held(config, posts)).toEqual(posts.map(() => true));
    expect(warmer.stats()).toMatchObject({ waiting: 0, loaded: 250, failedBatches: 0 });
  });

  it("when its queue is full, then what it cannot take is dropped and counted, and what it took is loaded", async () => {
    const config = testConfig();
    const posts = await createPosts({ db, redis }, config, author.id, 30);
    await emptyRedis(redis);
    const { loader } = countedLoader(config);
    const warmer = createWarmer({ loader, maxWaiting: 10, batchSize: 10, perSecond: 10_000 });
    warmer.want(posts);
    await warmer.idle();
    expect(warmer.stats()).toMatchObject({ dropped: 20, loaded: 10 });
    expect((await held(config, posts)).filter(Boolean)).toHaveLength(10);
  });
});

describe("the loads' locks", () => {
  it("when the answer to a load's lock is lost (Redis held past the command timeout), then the load fails, and the target's next load takes the lock at once instead of waiting out its lease", async () => {
    const config = testConfig();
    const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
    await emptyRedis(redis);
    const url = new URL(privateRedisUrl());
    const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
    const proxied = await openRedis({ url: proxy.url, commandTimeoutMs: 300 });
    proxied.on("error", () => undefined);
    try {
      const keys = createRedisKeys(config.redisPartitions);
      const catalog = createCatalog({ users: createUserStore(db), posts: createPostStore(db), comments: createCommentStore(db) });
      // Only the lock's acquire goes through the proxy: its release, sent at once, finds nothing to release.
      const direct = createRebuildStore(redis, keys);
      const viaProxy = createRebuildStore(proxied, keys);
      const loader = createTargetLoader({
        rebuildStore: { ...direct, lock: (target, ttlMs, token) => viaProxy.lock(target, ttlMs, token) },
        snapshots: createSnapshotStore(db),
        counterStore: createCounterStore(redis, keys),
        lookup: lookupTarget(catalog),
      });
      proxy.hold();
      await expect(loader.load([post])).rejects.toThrow();
      expect(await redis.exists(keys.rebuildLock(post))).toBe(0);
      // The held acquire reaches Redis now and takes the lock, for a lease of 15 s.
      proxy.resume();
      await expect.poll(() => redis.exists(keys.rebuildLock(post))).toBe(1);
      expect(await loader.load([post])).toEqual(["loaded"]);
      expect(await redis.exists(keys.rebuildLock(post))).toBe(0);
      expect(await held(config, [post])).toEqual([true]);
    } finally {
      proxied.disconnect();
      await proxy.close();
    }
  });
});

describe("cold reads through the API", () => {
  let api: TestApi;
  let viewers: TestUser[];

  beforeAll(async () => {
    api = await startTestApi({ RATE_LIMIT_IP_QUERY_COST: "1000", RATE_LIMIT_VIEWER_QUERY_COST: "3000" });
    viewers = await createUsers(db, api.config, 3);
  });
  afterAll(() => api.close());

  /** Posts whose likes are persisted: post i liked by users 1..3i and by viewers[0] when i is odd. */
  async function persistedPosts(count: number): Promise<LikeableTarget[]> {
    const posts = await createPosts({ db, redis }, api.config, author.id, count);
    const pipeline = await startTestPipeline(api.config);
    try {
      for (const [i, post] of posts.entries()) {
        await Promise.all(Array.from({ length: i * 3 }, (_, u) => api.services.memberships.join("like", post, BigInt(u + 1))));
        if (i % 2 === 1) await api.services.memberships.join("like", post, (viewers[0] as TestUser).id);
      }
      await agreeWithin({ db, redis }, api.config, posts);
    } finally {
      await pipeline.stop();
    }
    return posts;
  }

  it("when a viewer reads posts Redis lost, then counts and viewerHasLiked come from PostgreSQL at once, and the warmer loads the posts after the answer", async () => {
    const posts = await persistedPosts(5);
    const ids = posts.map((p) => p.id.toString());
    await emptyRedis(redis);
    const viewer = viewers[0] as TestUser;

    const cold = await api.gql<PostsAnswer>(postsQuery, { ids }, viewer.token);
    expect(codesOf(cold)).toEqual([]);
    expect(likesOf(cold)).toEqual([0, 4, 6, 10, 12]);
    expect(likedOf(cold)).toEqual([false, true, false, true, false]);
    await api.warmer.idle();
    expect(await held(api.config, posts)).toEqual(posts.map(() => true));
    // Warm now, the same answer from Redis.
    const warm = await api.gql<PostsAnswer>(postsQuery, { ids }, viewer.token);
    expect(likesOf(warm)).toEqual([0, 4, 6, 10, 12]);
    expect(likedOf(warm)).toEqual([false, true, false, true, false]);
  });

  it("when a viewer likes a post Redis does not hold, then the like loads it first and the viewer's next read shows the like", async () => {
    const [post] = (await createPosts({ db, redis }, api.config, author.id, 1)) as [LikeableTarget];
    await emptyRedis(redis);
    const viewer = viewers[1] as TestUser;
    const ids = [post.id.toString()];
    expect(likedOf(await api.gql<PostsAnswer>(postsQuery, { ids }, viewer.token))).toEqual([false]);
    const liked = await api.gql(
      "mutation($id: ID!) { likePost(postId: $id) { changed post { counts { likes } viewerHasLiked } } }",
      { id: ids[0] },
      viewer.token,
    );
    expect(liked.data).toEqual({ likePost: { changed: true, post: { counts: { likes: 1 }, viewerHasLiked: true } } });
    const after = await api.gql<PostsAnswer>(postsQuery, { ids }, viewer.token);
    expect([likesOf(after), likedOf(after)]).toEqual([[1], [true]]);
  });

  it("when an anonymous crawler reads cold posts, then each read pays for them and the crawler runs out of budget; warm posts cost nothing", async () => {
    const posts = await createPosts({ db, redis }, api.config, author.id, 20);
    const ids = posts.map((p) => p.id.toString());
    await emptyRedis(redis);
    // Read once, then loaded behind the read: reading them again and again costs no budget.
    expect(codesOf(await api.gql(postsQuery, { ids }))).toEqual([]);
    await api.warmer.idle();
    for (let i = 0; i < 12; i++) expect(codesOf(await api.gql(postsQuery, { ids }))).toEqual([]);

    await api.warmer.close();
    await emptyRedis(redis);
    // Until Redis's word of the flush arrives, the process may still answer the counts it holds.
    await eventually(
      async () => (api.hotCounts?.stats().entries ?? 0) === 0,
      5_000,
      () => `${api.hotCounts?.stats().entries} counts held`,
    );
    // 20 cold posts cost 200 of the address's 1,000 units: five reads, then a refusal.
    for (let i = 0; i < 5; i++) expect(likesOf(await api.gql(postsQuery, { ids }))).toEqual(posts.map(() => 0));
    const refused = await api.gql(postsQuery, { ids });
    expect(new Set(codesOf(refused))).toEqual(new Set([ErrorCode.RATE_LIMITED]));
    expect(await held(api.config, posts)).toEqual(posts.map(() => false));
  });
});
