// A viewer's member index (the posts they liked, kept in their own slot): once
// loaded, a feed rules out with one command the posts its viewer did not like
// instead of asking each post's shards, and it answers as the shards do before
// the load, after it, and after likes and unlikes made through another process.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../../src/stores/postgres/database.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createRedisKeys, type RedisKeys } from "../../../src/stores/redis/keys.js";
import { memberIndexProtocol, startIndexFence } from "../../../src/stores/redis/index-fence.js";
import { memberIndexIdleMs } from "../../../src/stores/redis/member-index-store.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { createUsers, dataOf, openDatabase, openRedis, type TestUser } from "../../support/env.js";
import { startTestPipeline } from "../../support/pipeline.js";

let reader: TestApi;
let writer: TestApi;
let db: Database;
let redis: RedisClient;
let keys: RedisKeys;
let viewer: TestUser;
let postIds: string[];

const feedQuery = `query($ids: [ID!]!) { posts(ids: $ids) { id counts { likes } viewerHasLiked } }`;
type Feed = { posts: { id: string; counts: { likes: number }; viewerHasLiked: boolean }[] };
const like = (api: TestApi, id: string) => api.gql(`mutation($id: ID!) { likePost(postId: $id) { changed } }`, { id }, viewer.token);
const unlike = (api: TestApi, id: string) => api.gql(`mutation($id: ID!) { unlikePost(postId: $id) { changed } }`, { id }, viewer.token);

async function likedInFeed(): Promise<boolean[]> {
  return dataOf(await reader.gql<Feed>(feedQuery, { ids: postIds }, viewer.token)).posts.map((p) => p.viewerHasLiked);
}

async function sismembers(): Promise<number> {
  return Number(/cmdstat_sismember:calls=(\d+)/.exec(await redis.info("commandstats"))?.[1] ?? 0);
}

const indexKey = () => keys.memberIndex("like", "post", viewer.id);
const indexComplete = async () => (await redis.sismember(indexKey(), "0")) === 1;

beforeAll(async () => {
  // No counts in memory: every feed asks Redis for the viewer's memberships of all its posts.
  reader = await startTestApi({ HOT_COUNTS_TARGETS: "0" });
  writer = await startTestApi({ HOT_COUNTS_TARGETS: "0" });
  db = openDatabase(reader.config);
  redis = await openRedis();
  keys = createRedisKeys(reader.config.redisPartitions);
  const [author, v] = await createUsers(db, reader.config, 2);
  viewer = v as TestUser;
  postIds = [];
  for (let i = 0; i < 30; i++) {
    const res = await writer.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "p${i}", body: "b") { id } }`, {}, author?.token);
    postIds.push(dataOf(res).createPost.id);
  }
});
afterAll(async () => {
  await reader.close();
  await writer.close();
  await db.$disconnect();
  await redis.quit();
});

describe("member indexes", () => {
  it("when a viewer's index is loaded from PostgreSQL, then the feed answers as before it and looks up only the posts it holds", async () => {
    // Likes PostgreSQL holds (as the pipeline writes them) whose notes Redis lacks, as after an upgrade.
    for (const id of postIds.filter((_, i) => i % 3 === 0)) expect(dataOf(await like(writer, id))).toEqual({ likePost: { changed: true } });
    await redis.del(indexKey());
    await db.$executeRawUnsafe(
      `INSERT INTO likes (target_type, target_id, user_id) SELECT 'post', unnest($1::bigint[]), $2::bigint`,
      postIds.filter((_, i) => i % 3 === 0),
      viewer.id.toString(),
    );
    const expected = postIds.map((_, i) => i % 3 === 0);

    const before = await sismembers();
    expect(await likedInFeed()).toEqual(expected);
    expect((await sismembers()) - before).toBeGreaterThanOrEqual(postIds.length);

    await expect.poll(indexComplete, { timeout: 10_000 }).toBe(true);
    const after = await sismembers();
    expect(await likedInFeed()).toEqual(expected);
    expect((await sismembers()) - after).toBe(expected.filter(Boolean).length);
  });

  it("when the viewer likes and unlikes through another process, then the next feed shows both at once", async () => {
    await expect.poll(indexComplete, { timeout: 10_000 }).toBe(true);
    const [liked, unliked] = [postIds[1] as string, postIds[0] as string];
    expect(dataOf(await like(writer, liked))).toEqual({ likePost: { changed: true } });
    expect(dataOf(await unlike(writer, unliked))).toEqual({ unlikePost: { changed: true } });
    const feed = await likedInFeed();
    expect(feed[1]).toBe(true);
    expect(feed[0]).toBe(false);
    expect(feed).toEqual(postIds.map((_, i) => i === 1 || (i % 3 === 0 && i !== 0)));
  });

  it("when an index holds a post the viewer no longer likes or lacks one they do, then only the lack changes the answer", async () => {
    // The index may hold more than the viewer's likes (an unlike leaves its post), never less:
    // a post it holds is looked up in the shards, a post it lacks is answered at once.
    expect(await redis.sismember(indexKey(), postIds[0] as string)).toBe(1);
    expect((await likedInFeed())[0]).toBe(false);
    await redis.srem(indexKey(), postIds[3] as string);
    expect((await likedInFeed())[3]).toBe(false);
  });

  it("when a viewer reads users they follow, then their index of follows loads and the answers stay exact", async () => {
    const [followed, other] = (await createUsers(db, reader.config, 2)) as [TestUser, TestUser];
    await writer.gql(`mutation($id: ID!) { followUser(userId: $id) { changed } }`, { id: followed.id.toString() }, viewer.token);
    const query = `query { a: user(id: "${followed.id}") { viewerFollows } b: user(id: "${other.id}") { viewerFollows } }`;
    const read = async () => dataOf(await reader.gql<{ a: { viewerFollows: boolean }; b: { viewerFollows: boolean } }>(query, {}, viewer.token));
    expect(await read()).toEqual({ a: { viewerFollows: true }, b: { viewerFollows: false } });
    await expect.poll(async () => redis.sismember(keys.memberIndex("follow", "user", viewer.id), "0"), { timeout: 10_000 }).toBe(1);
    expect(await read()).toEqual({ a: { viewerFollows: true }, b: { viewerFollows: false } });
  });

  it("when an index reaches its capacity, then it is marked overflowed and the feed looks up every post again", async () => {
    await redis.sadd(indexKey(), ...Array.from({ length: 5_000 }, (_, i) => String(10n ** 17n + BigInt(i))));
    expect(dataOf(await like(writer, postIds[2] as string))).toEqual({ likePost: { changed: true } });
    expect(await redis.sismember(indexKey(), "-1")).toBe(1);
    const before = await sismembers();
    const feed = await likedInFeed();
    expect((await sismembers()) - before).toBeGreaterThanOrEqual(postIds.length);
    expect(feed[2]).toBe(true);
    expect(feed[3]).toBe(true);
  });

  it("when an index expires while it holds a like not yet persisted, then its next load has the like from the pending record, which the consumer empties once PostgreSQL has it", async () => {
    await expect.poll(indexComplete, { timeout: 10_000 }).toBe(true);
    const week = memberIndexIdleMs;
    const pendingKey = keys.memberPending("like", "post", viewer.id);
    // A like no pipeline carries yet: PostgreSQL does not have it, the pending record does.
    const [author] = await createUsers(db, reader.config, 1);
    const post = dataOf(await writer.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "idle", body: "b") { id } }`, {}, author?.token))
      .createPost.id;
    expect(dataOf(await like(writer, post))).toEqual({ likePost: { changed: true } });
    expect(await redis.hexists(pendingKey, post)).toBe(1);
    expect(await redis.pttl(indexKey())).toBeGreaterThan(week - 60_000);

    // Unused past its expiry, Redis lets the index go; the next read loads it again: PostgreSQL lacks the like, the pending record has it.
    await redis.pexpire(indexKey(), 1);
    await expect.poll(async () => redis.exists(indexKey()), { timeout: 5_000 }).toBe(0);
    // A like while the index is gone makes none (it would have no mark and no expiry): the pending record holds it.
    const later = dataOf(await writer.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "idle 2", body: "b") { id } }`, {}, author?.token))
      .createPost.id;
    expect(dataOf(await like(writer, later))).toEqual({ likePost: { changed: true } });
    expect(await redis.exists(indexKey())).toBe(0);
    expect(await redis.hexists(pendingKey, later)).toBe(1);
    const fresh = await startTestApi({ HOT_COUNTS_TARGETS: "0" });
    try {
      const read = async () => dataOf(await fresh.gql<Feed>(feedQuery, { ids: [post] }, viewer.token)).posts[0]?.viewerHasLiked;
      expect(await read()).toBe(true);
      await fresh.memberIndexes?.idle();
      expect(await indexComplete()).toBe(true);
      expect(await redis.sismember(indexKey(), post)).toBe(1);
      expect(await redis.sismember(indexKey(), later)).toBe(1);
      expect(await read()).toBe(true);

      // Persisted: the consumer empties the pending record.
      const pipeline = await startTestPipeline(reader.config);
      try {
        await expect.poll(async () => redis.exists(pendingKey), { timeout: 10_000 }).toBe(0);
      } finally {
        await pipeline.stop();
      }
      // A read of a process that did not touch the index lately sets its idle expiry anew.
      await redis.pexpire(indexKey(), 5_000);
      const another = await startTestApi({ HOT_COUNTS_TARGETS: "0" });
      try {
        dataOf(await another.gql<Feed>(feedQuery, { ids: postIds }, viewer.token));
        await expect.poll(async () => redis.pttl(indexKey()), { timeout: 5_000 }).toBeGreaterThan(week - 60_000);
      } finally {
        await another.close();
      }
    } finally {
      await fresh.close();
    }
  });
  it("when a process of another version writes, then indexes answer nothing: a like its index lacks is seen", async () => {
    const [author] = (await createUsers(db, reader.config, 1)) as [TestUser];
    const post = dataOf(await writer.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "f", body: "b") { id } }`, {}, author.token)).createPost
      .id;
    const viewerHasLiked = async () => dataOf(await reader.gql<Feed>(feedQuery, { ids: [post] }, viewer.token)).posts[0]?.viewerHasLiked;
    expect(await viewerHasLiked()).toBe(false);
    await expect.poll(indexComplete, { timeout: 10_000 }).toBe(true);

    // Another version registers; it waits until the running processes have heard of it.
    const other = await startIndexFence(redis, keys.writers(), { protocol: memberIndexProtocol + 1 });
    try {
      // A like whose note the viewer's complete index lacks, as a version noting another way leaves it.
      expect(dataOf(await like(writer, post))).toEqual({ likePost: { changed: true } });
      await redis.srem(indexKey(), post);
      expect(await viewerHasLiked()).toBe(true);
    } finally {
      await other?.close();
    }
  });
});
