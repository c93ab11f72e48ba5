// recordViews: every reported view counts, aggregated in the process and flushed
// to Redis about once a second, then carried to PostgreSQL by the pipeline.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../../src/stores/postgres/database.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { createRebuildStore } from "../../../src/stores/redis/rebuild-store.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { codesOf, createUsers, dataOf, itOnSingle, openDatabase, openRedis, type TestUser } from "../../support/env.js";
import { eventually, startTestPipeline } from "../../support/pipeline.js";

let api: TestApi;
let db: Database;
let redis: RedisClient;
let author: TestUser;

const recordViews = `mutation($ids: [ID!]!) { recordViews(postIds: $ids) }`;

async function createPost(): Promise<string> {
  return dataOf(await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "t", body: "b") { id } }`, {}, author.token)).createPost.id;
}

const readsOf = async (postId: string) =>
  dataOf(await api.gql<{ post: { counts: { reads: number } } }>(`query($id: ID!) { post(id: $id) { counts { reads } } }`, { id: postId })).post.counts.reads;

/** The views flushes of one post appended to its partition's outbox. */
async function flushesOf(postId: string): Promise<number> {
  const keys = createRedisKeys(api.config.redisPartitions);
  const entries = await redis.xrange(keys.outbox({ type: "post", id: BigInt(postId) }), "-", "+");
  return entries.filter(([, f]) => f[f.indexOf("i") + 1] === postId && f.includes("k")).length;
}

beforeAll(async () => {
  api = await startTestApi();
  db = openDatabase(api.config);
  redis = await openRedis();
  author = (await createUsers(db, api.config, 1))[0] as TestUser;
});
afterAll(async () => {
  await api.close();
  await db.$disconnect();
  await redis.quit();
});

describe("recordViews", () => {
  it("when views are reported, anonymously too, then each counts (repeats as well), unknown posts are skipped, and the answer says how many counted", async () => {
    const [a, b] = [await createPost(), await createPost()];
    expect(dataOf(await api.gql<{ recordViews: number }>(recordViews, { ids: [a, b, a, "9100000000000000005"] }))).toEqual({ recordViews: 3 });
    expect(dataOf(await api.gql<{ recordViews: number }>(recordViews, { ids: [b] }, author.token))).toEqual({ recordViews: 1 });
    await eventually(
      async () => (await readsOf(a)) === 2 && (await readsOf(b)) === 2,
      5_000,
      async () => `reads ${await readsOf(a)}, ${await readsOf(b)}`,
    );
  });

  itOnSingle("when more than 100 ids or a malformed id arrive, then it is BAD_USER_INPUT and nothing counts", async () => {
    const post = await createPost();
    expect(codesOf(await api.gql(recordViews, { ids: Array.from({ length: 101 }, () => post) }))).toEqual(["BAD_USER_INPUT"]);
    expect(codesOf(await api.gql(recordViews, { ids: [post, "01"] }))).toEqual(["BAD_USER_INPUT"]);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await readsOf(post)).toBe(0);
  });

  it("when a storm of 20,000 views hits one post, then all are counted once flushed, in about one Redis write a second", async () => {
    const post = await createPost();
    const started = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 200 }, () => api.gql<{ recordViews: number }>(recordViews, { ids: Array.from({ length: 100 }, () => post) })),
    );
    const seconds = (Date.now() - started) / 1000;
    expect(answers.reduce((n, r) => n + dataOf(r).recordViews, 0)).toBe(20_000);
    await eventually(
      async () => (await readsOf(post)) === 20_000,
      5_000,
      async () => `reads ${await readsOf(post)}`,
    );
    // One flush a second at most (and one when the storm ended), whatever the number of requests.
    expect(await flushesOf(post)).toBeLessThanOrEqual(Math.ceil(seconds) + 2);
  });

  it("when a viewed post has left Redis, then the flush loads it back and its views count on top of what PostgreSQL held", async () => {
    const post = await createPost();
    await api.gql(recordViews, { ids: [post, post] });
    await eventually(
      async () => (await readsOf(post)) === 2,
      5_000,
      async () => `reads ${await readsOf(post)}`,
    );
    const pipeline = await startTestPipeline(api.config);
    try {
      const persisted = () =>
        db.counter
          .findUnique({ where: { targetType_targetId_name: { targetType: "post", targetId: BigInt(post), name: "read" } } })
          .then((c) => Number(c?.value ?? 0));
      await eventually(
        async () => (await persisted()) === 2,
        30_000,
        async () => `persisted ${await persisted()}`,
      );
      expect(await createRebuildStore(redis, createRedisKeys(api.config.redisPartitions)).drop({ type: "post", id: BigInt(post) })).toBe("evicted");
      await api.gql(recordViews, { ids: [post, post, post] });
      await eventually(
        async () => (await persisted()) === 5,
        30_000,
        async () => `persisted ${await persisted()}`,
      );
      expect(await readsOf(post)).toBe(5);
    } finally {
      await pipeline.stop();
    }
  });
});
