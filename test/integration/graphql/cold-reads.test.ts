// Reads of targets Redis does not hold are bounded: a process loads a few at a time,
// each within the request's deadline; anonymous counts come from PostgreSQL without
// loading anything; and every load is paid from the caller's budget.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Config } from "../../../src/config.js";
import { createCounterService } from "../../../src/domain/counters.js";
import { lookupTarget, createCatalog } from "../../../src/domain/catalog.js";
import type { LikeableTarget, Target } from "../../../src/domain/model/index.js";
import type { SnapshotStore } from "../../../src/domain/ports/index.js";
import { createRebuildSlots } from "../../../src/domain/rebuild-slots.js";
import { DomainError, ErrorCode } from "../../../src/errors.js";
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
import { codesOf, createUsers, emptyRedis, testConfig, type TestUser } from "../../support/env.js";
import { eventually, startTestPipeline } from "../../support/pipeline.js";
import { agreeWithin, createPosts, useStores } from "../../support/stores.js";

let db: Database;
let redis: RedisClient;
let author: TestUser;

useStores((s) => ({ db, redis, author } = s));

const postsQuery = "query($ids: [ID!]!) { posts(ids: $ids) { id counts { likes } } }";
const likesOf = (response: { data?: { posts: ({ counts: { likes: number } } | null)[] } | null }) => response.data?.posts.map((p) => p?.counts.likes ?? null);
const heldCounterHashes = async () => (await redis.keys("cnt:*")).length;
const codeOf = (error: unknown) => (error instanceof DomainError ? error.code : String(error));

/** A counter service on the real stores whose snapshots (one per rebuild) report how many run at once. */
function countedService(config: Config, atOnce: number) {
  const keys = createRedisKeys(config.redisPartitions);
  const real = createSnapshotStore(db);
  const counted = { now: 0, most: 0, taken: 0 };
  const snapshots: SnapshotStore = {
    ...real,
    async read(target) {
      counted.most = Math.max(counted.most, ++counted.now);
      counted.taken++;
      try {
        return await real.read(target);
      } finally {
        counted.now--;
      }
    },
  };
  const catalog = createCatalog({ users: createUserStore(db), posts: createPostStore(db), comments: createCommentStore(db) });
  const counters = createCounterService({
    counterStore: createCounterStore(redis, keys),
    rebuildStore: createRebuildStore(redis, keys),
    snapshots,
    lookup: lookupTarget(catalog),
    slots: createRebuildSlots({ atOnce, maxWaiting: 256 }),
  });
  return { counters, counted, rebuilds: createRebuildStore(redis, keys) };
}

describe("rebuilds per process", () => {
  it("when a viewer reads 100 posts Redis does not hold, then at most the slots' worth are loaded at once, and all are answered", async () => {
    const config = testConfig();
    const posts = await createPosts({ db, redis }, config, author.id, 100);
    const { counters, counted, rebuilds } = countedService(config, 3);
    for (const post of posts) expect(await rebuilds.evict(post, 0n)).toBe("evicted");

    const views = await counters.view(posts, 7n, undefined, { deadlineAtMs: Date.now() + 30_000 });
    expect(views.map((v) => v.counts.like)).toEqual(posts.map(() => 0));
    expect(counted.taken).toBe(100);
    expect(counted.most).toBeLessThanOrEqual(3);
  });

  it("when a read's deadline has passed before a slot is free, then SERVICE_UNAVAILABLE and nothing is loaded", async () => {
    const config = testConfig();
    const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
    const { counters, counted, rebuilds } = countedService(config, 1);
    await rebuilds.evict(post, 0n);
    await expect(counters.view([post], 7n, undefined, { deadlineAtMs: Date.now() - 1 }).catch(codeOf)).resolves.toBe(ErrorCode.SERVICE_UNAVAILABLE);
    await expect(counters.rebuild(post, Date.now() - 1).catch(codeOf)).resolves.toBe(ErrorCode.SERVICE_UNAVAILABLE);
    expect(counted.taken).toBe(0);
  });
});

describe("cold reads through the API", () => {
  let api: TestApi;
  let viewer: TestUser;

  beforeAll(async () => {
    api = await startTestApi({ RATE_LIMIT_IP_QUERY_COST: "1000", RATE_LIMIT_VIEWER_QUERY_COST: "3000" });
    [viewer] = (await createUsers(db, api.config, 1)) as [TestUser];
  });
  afterAll(() => api.close());

  it("when an anonymous reader asks posts Redis lost, then their counts come exact from PostgreSQL and nothing is loaded into Redis", async () => {
    const posts = await createPosts({ db, redis }, api.config, author.id, 5);
    const pipeline = await startTestPipeline(api.config);
    try {
      for (const [i, post] of posts.entries()) {
        await Promise.all(Array.from({ length: i * 3 }, (_, u) => api.services.memberships.join("like", post, BigInt(u + 1))));
      }
      await agreeWithin({ db, redis }, api.config, posts);
    } finally {
      await pipeline.stop();
    }
    const ids = posts.map((p) => p.id.toString());
    const epochs = () => db.targetEpoch.count({ where: { targetType: "post", targetId: { in: posts.map((p) => p.id) } } });
    const epochsBefore = await epochs();

    await emptyRedis(redis);
    const anonymous = await api.gql<{ posts: { counts: { likes: number } }[] }>(postsQuery, { ids });
    expect(likesOf(anonymous)).toEqual([0, 3, 6, 9, 12]);
    expect(await heldCounterHashes()).toBe(0);
    expect(await epochs()).toBe(epochsBefore);

    // A viewer needs memberships: the posts are loaded, with the same counts.
    const signedIn = await api.gql<{ posts: { counts: { likes: number } }[] }>(postsQuery, { ids }, viewer.token);
    expect(likesOf(signedIn)).toEqual([0, 3, 6, 9, 12]);
    expect(await heldCounterHashes()).toBe(5);
  });

  it("when an anonymous crawler reads cold posts, then each read pays for them and the crawler runs out of budget; warm posts cost nothing", async () => {
    const posts = await createPosts({ db, redis }, api.config, author.id, 20);
    const ids = posts.map((p) => p.id.toString());
    await emptyRedis(redis);
    const viewed = await api.gql(postsQuery, { ids }, viewer.token);
    expect(codesOf(viewed)).toEqual([]);
    // Loaded now: reading them again and again costs no budget.
    for (let i = 0; i < 12; i++) expect(codesOf(await api.gql(postsQuery, { ids }))).toEqual([]);

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
  });

  it("when a viewer's read rebuilds posts, then each rebuild is paid from the viewer's budget", async () => {
    await emptyRedis(redis);
    const [other] = (await createUsers(db, api.config, 1)) as [TestUser];
    const batches = await Promise.all([0, 1].map(() => createPosts({ db, redis }, api.config, author.id, 20)));
    await emptyRedis(redis);
    const [first, second] = batches.map((posts) => posts.map((p: Target) => p.id.toString())) as [string[], string[]];
    // 20 rebuilds cost 2,000 of the viewer's 3,000 units (and of the address's budget, refilled here by the flush).
    expect(codesOf(await api.gql(postsQuery, { ids: first }, other.token))).toEqual([]);
    await redis.del(...(await redis.keys("rl:{ipQueryCost*")));
    const refused = await api.gql(postsQuery, { ids: second }, other.token);
    expect(new Set(codesOf(refused))).toEqual(new Set([ErrorCode.RATE_LIMITED]));
  });
});
