// A feed of 100 posts with four counts and viewerHasLiked: Redis round trips
// counted from the private server's INFO stats, SQL from the API's query hook.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../../src/stores/postgres/database.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { createRankingStore } from "../../../src/stores/redis/ranking-store.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { burstDeadlines, createUsers, dataOf, openDatabase, openRedis, type TestUser } from "../../support/env.js";

let api: TestApi;
let db: Database;
let redis: RedisClient;
let viewer: TestUser;
let postIds: string[];

const feedQuery = `query($ids: [ID!]!) { posts(ids: $ids) { id title counts { likes reads comments collects } viewerHasLiked viewerHasCollected } }`;
type Feed = { posts: { id: string; counts: { likes: number; collects: number }; viewerHasLiked: boolean; viewerHasCollected: boolean }[] };

async function readsProcessed(): Promise<number> {
  const stats = await redis.info("stats");
  return Number(/total_reads_processed:(\d+)/.exec(stats)?.[1]);
}

/** Redis reads the server made while `action` ran, less the two INFO calls around it. */
async function roundTrips(action: () => Promise<unknown>): Promise<number> {
  const before = await readsProcessed();
  await action();
  const after = await readsProcessed();
  return after - before - 1;
}

/**
 * The fewest round trips of `runs` runs of an action that costs the same each time: the
 * service's own timers (a writer's lease renewed every 5 s) only ever add reads.
 */
async function fewestRoundTrips(action: () => Promise<unknown>, runs = 3): Promise<number> {
  let fewest = Number.POSITIVE_INFINITY;
  for (let i = 0; i < runs; i++) fewest = Math.min(fewest, await roundTrips(action));
  return fewest;
}

/**
 * The APIs here keep no counts in memory: the listeners of counter writes ping
 * Redis on a timer, and those reads would mix with the reads counted. What the
 * counts in memory cost is counted in commands instead (the last test).
 */
const withoutHotCounts = { HOT_COUNTS_TARGETS: "0", ...burstDeadlines };

beforeAll(async () => {
  api = await startTestApi(withoutHotCounts);
  db = openDatabase(api.config);
  redis = await openRedis();
  const [author, v] = await createUsers(db, api.config, 2);
  viewer = v as TestUser;
  postIds = [];
  for (let i = 0; i < 100; i++) {
    const res = await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "p${i}", body: "b") { id } }`, {}, author?.token);
    postIds.push(dataOf(res).createPost.id);
  }
  for (const id of postIds.filter((_, i) => i % 3 === 0)) {
    await api.gql(`mutation($id: ID!) { likePost(postId: $id) { changed } }`, { id }, viewer.token);
  }
  for (const id of postIds.filter((_, i) => i % 4 === 0)) {
    await api.gql(`mutation($id: ID!) { collectPost(postId: $id) { changed } }`, { id }, viewer.token);
  }
});
afterAll(async () => {
  await api.close();
  await db.$disconnect();
  await redis.quit();
});

/**
 * Waits until the viewer's member indexes of likes and collects are loaded: the
 * first feed asks for them, and the load's SQL must not fall in what is counted.
 */
async function indexesLoaded(): Promise<void> {
  const keys = createRedisKeys(api.config.redisPartitions);
  const complete = async () =>
    (await Promise.all((["like", "collect"] as const).map((r) => redis.sismember(keys.memberIndex(r, "post", viewer.id), "0")))).every((m) => m === 1);
  await expect.poll(complete, { timeout: 10_000 }).toBe(true);
}

describe("feed of 100 posts", () => {
  it("when a viewer asks for 100 posts with every count, viewerHasLiked and viewerHasCollected, then it costs at most 2 Redis round trips and no SQL for the counts", async () => {
    await api.gql(feedQuery, { ids: postIds }, viewer.token);
    await indexesLoaded();
    const sqlBefore = api.sqlQueries();
    let response: Awaited<ReturnType<typeof api.gql<Feed>>> | undefined;
    const trips = await fewestRoundTrips(async () => {
      response = await api.gql<Feed>(feedQuery, { ids: postIds }, viewer.token);
    });
    const posts = dataOf(response as NonNullable<typeof response>).posts;
    expect(posts.map((p) => p.viewerHasLiked)).toEqual(postIds.map((_, i) => i % 3 === 0));
    expect(posts.map((p) => p.counts.likes)).toEqual(postIds.map((_, i) => (i % 3 === 0 ? 1 : 0)));
    expect(posts.map((p) => p.viewerHasCollected)).toEqual(postIds.map((_, i) => i % 4 === 0));
    expect(posts.map((p) => p.counts.collects)).toEqual(postIds.map((_, i) => (i % 4 === 0 ? 1 : 0)));
    expect(trips).toBeGreaterThanOrEqual(1);
    expect(trips).toBeLessThanOrEqual(2);
    expect(api.sqlQueries() - sqlBefore).toBe(0);
  });

  it("when a supergraph's router asks _entities for the same 100 posts, then it costs what posts(ids:) costs: at most 2 Redis round trips and no SQL", async () => {
    const entities = `query($r: [_Any!]!) { _entities(representations: $r) { ... on Post { id counts { likes reads comments collects } viewerHasLiked viewerHasCollected } } }`;
    const representations = postIds.map((id) => ({ __typename: "Post", id }));
    await api.gql(entities, { r: representations }, viewer.token);
    await indexesLoaded();
    const sqlBefore = api.sqlQueries();
    let response: Awaited<ReturnType<typeof api.gql<{ _entities: Feed["posts"] }>>> | undefined;
    const trips = await fewestRoundTrips(async () => {
      response = await api.gql<{ _entities: Feed["posts"] }>(entities, { r: representations }, viewer.token);
    });
    const posts = dataOf(response as NonNullable<typeof response>)._entities;
    expect(posts.map((p) => p.id)).toEqual(postIds);
    expect(posts.map((p) => p.viewerHasLiked)).toEqual(postIds.map((_, i) => i % 3 === 0));
    expect(posts.map((p) => p.counts.likes)).toEqual(postIds.map((_, i) => (i % 3 === 0 ? 1 : 0)));
    expect(posts.map((p) => p.viewerHasCollected)).toEqual(postIds.map((_, i) => i % 4 === 0));
    expect(trips).toBeGreaterThanOrEqual(1);
    expect(trips).toBeLessThanOrEqual(2);
    expect(api.sqlQueries() - sqlBefore).toBe(0);
  });

  it("when a feed selects viewerHasLiked but not viewerHasCollected, then it looks the viewer up among likers only", async () => {
    const sismembers = async () => Number(/cmdstat_sismember:calls=(\d+)/.exec(await redis.info("commandstats"))?.[1] ?? 0);
    const likedOnly = `query($ids: [ID!]!) { posts(ids: $ids) { id counts { likes collects } viewerHasLiked } }`;
    const ids = postIds.slice(2, 52);
    await api.gql(likedOnly, { ids }, viewer.token);
    const before = await sismembers();
    const posts = dataOf(await api.gql<Feed>(likedOnly, { ids }, viewer.token)).posts;
    expect(posts.map((p) => p.viewerHasLiked)).toEqual(ids.map((_, i) => (i + 2) % 3 === 0));
    // The viewer's index of likes rules out the posts they did not like; those they liked
    // are looked up in their likers' first generation; none among the collectors.
    expect((await sismembers()) - before).toBe(ids.filter((_, i) => (i + 2) % 3 === 0).length);
  });

  it("when a post has grown past its first membership generation, then viewerHasLiked costs at most 2 round trips, and 1 once the process has seen it grow", async () => {
    const big = postIds[1] as string;
    // Force a second generation by filling the viewer's first-generation shard with other members.
    const others = await createUsers(db, api.config, 520);
    await Promise.all(others.map((u) => api.gql(`mutation($id: ID!) { likePost(postId: $id) { changed } }`, { id: big }, u.token)));
    await api.gql(`mutation($id: ID!) { likePost(postId: $id) { changed } }`, { id: big }, viewer.token);
    let response: Awaited<ReturnType<typeof api.gql<Feed>>> | undefined;
    const trips = await roundTrips(async () => {
      response = await api.gql<Feed>(feedQuery, { ids: postIds }, viewer.token);
    });
    const posts = dataOf(response as NonNullable<typeof response>).posts;
    expect(posts[1]).toMatchObject({ viewerHasLiked: true, counts: { likes: 521 } });
    expect(trips).toBeLessThanOrEqual(2);

    // The process now knows how far the post has grown: the same feed is one round trip.
    const again = await fewestRoundTrips(async () => {
      response = await api.gql<Feed>(feedQuery, { ids: postIds }, viewer.token);
    });
    expect(dataOf(response as NonNullable<typeof response>).posts[1]).toMatchObject({ viewerHasLiked: true, counts: { likes: 521 } });
    expect(again).toBe(1);
  });

  it("when hotPosts asks for 100 posts with every count, then it costs at most 2 Redis round trips (the ranking, the counts) and no SQL", async () => {
    // The ALL ranking as the pipeline would mirror it, post i with i + 1 likes, in place of what earlier files left.
    const { all } = createRedisKeys(api.config.redisPartitions).ranking;
    await redis.del(all.ranking, all.seqs);
    await createRankingStore(redis, createRedisKeys(api.config.redisPartitions)).mirror(
      { buckets: [], totals: postIds.map((id, i) => ({ target: { type: "post", id: BigInt(id) }, name: "like", value: i + 1, seq: 1n })) },
      Date.now(),
    );
    const hot = `{ hotPosts(first: 100, window: ALL) { id title counts { likes reads comments collects } } }`;
    await api.gql(hot);
    const sqlBefore = api.sqlQueries();
    let response: Awaited<ReturnType<typeof api.gql<{ hotPosts: { id: string }[] }>>> | undefined;
    const trips = await fewestRoundTrips(async () => {
      response = await api.gql<{ hotPosts: { id: string }[] }>(hot);
    });
    expect(dataOf(response as NonNullable<typeof response>).hotPosts.map((p) => p.id)).toEqual([...postIds].reverse());
    expect(trips).toBeGreaterThanOrEqual(1);
    expect(trips).toBeLessThanOrEqual(2);
    expect(api.sqlQueries() - sqlBefore).toBe(0);
  });

  it("when a viewer asks for users' counts and viewerFollows, then it costs one Redis round trip", async () => {
    const users = await createUsers(db, api.config, 30);
    for (const u of users.filter((_, i) => i % 2 === 0)) {
      await api.gql(`mutation($id: ID!) { followUser(userId: $id) { changed } }`, { id: u.id.toString() }, viewer.token);
    }
    const query = `query { ${users.map((u, i) => `u${i}: user(id: "${u.id}") { counts { followers following posts likesReceived collectsReceived } viewerFollows }`).join(" ")} }`;
    type Users = Record<string, { counts: { followers: number }; viewerFollows: boolean }>;
    // The users' rows are read once and their counters loaded behind that read; then the question is the round trips of a warm read.
    await api.gql(query, {}, viewer.token);
    await api.warmer.idle();
    await api.memberIndexes?.idle();
    let response: Awaited<ReturnType<typeof api.gql<Users>>> | undefined;
    const trips = await fewestRoundTrips(async () => {
      response = await api.gql<Users>(query, {}, viewer.token);
    });
    const read = dataOf(response as NonNullable<typeof response>);
    expect(users.map((_, i) => read[`u${i}`]?.viewerFollows)).toEqual(users.map((_, i) => i % 2 === 0));
    expect(users.map((_, i) => read[`u${i}`]?.counts.followers)).toEqual(users.map((_, i) => (i % 2 === 0 ? 1 : 0)));
    expect(trips).toBe(1);
  });
});

describe("a like", () => {
  it("when a user the API process has never seen likes a post it has never read, then the like is one script call, one round trip and no SQL", async () => {
    const [author, liker] = (await createUsers(db, api.config, 2)) as [TestUser, TestUser];
    const postId = dataOf(await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "fresh", body: "b") { id } }`, {}, author.token))
      .createPost.id;
    // A process started after both users existed: it knows them from its directory and has read no post.
    const fresh = await startTestApi(withoutHotCounts);
    try {
      const like = `mutation($id: ID!) { likePost(postId: $id) { changed post { id counts { likes } viewerHasLiked } } }`;
      const commands = async () => {
        const stats = await redis.info("commandstats");
        const calls = (name: string) => Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, "m").exec(stats)?.[1] ?? 0);
        let all = 0;
        for (const match of stats.matchAll(/^cmdstat_[^:]+:calls=(\d+)/gm)) all += Number(match[1]);
        return { scripts: calls("evalsha") + calls("eval"), all };
      };
      const sqlBefore = fresh.sqlQueries();
      const before = await commands();
      let response:
        | Awaited<ReturnType<typeof fresh.gql<{ likePost: { changed: boolean; post: { id: string; counts: { likes: number }; viewerHasLiked: boolean } } }>>>
        | undefined;
      const trips = await roundTrips(async () => {
        response = await fresh.gql(like, { id: postId }, liker.token);
      });
      const after = await commands();
      expect(dataOf(response as NonNullable<typeof response>).likePost).toEqual({
        changed: true,
        post: { id: postId, counts: { likes: 1 }, viewerHasLiked: true },
      });
      expect(trips).toBe(1);
      expect(after.scripts - before.scripts).toBe(1);
      // The script's own commands (its note in the user's member index, and in their pending record
      // until PostgreSQL has the like, among them), the EVALSHA and the two INFO around the like:
      // within the budget of 30 a like may cost, all in.
      expect(after.all - before.all).toBeLessThanOrEqual(18);
      expect(fresh.sqlQueries() - sqlBefore).toBe(0);
      // A payload that asks for the post's row reads it.
      const titled = await fresh.gql<{ unlikePost: { post: { title: string } } }>(
        `mutation($id: ID!) { unlikePost(postId: $id) { post { title } } }`,
        { id: postId },
        liker.token,
      );
      expect(dataOf(titled).unlikePost.post.title).toBe("fresh");
    } finally {
      await fresh.close();
    }
  });
});

describe("a feed whose counts the process holds", () => {
  it("when a viewer asks for posts whose counts the process holds, then one script call looks the viewer up and reads no counter hash", async () => {
    const held = await startTestApi();
    try {
      const ids = postIds.slice(10, 60);
      const likedOnly = `query($ids: [ID!]!) { posts(ids: $ids) { id counts { likes } viewerHasLiked } }`;
      for (let i = 0; i < 200 && !held.hotCounts?.servable(); i++) await new Promise((r) => setTimeout(r, 10));
      const first = dataOf(await held.gql<Feed>(likedOnly, { ids }, viewer.token)).posts;
      const calls = async () => {
        const stats = await redis.info("commandstats");
        const of = (name: string) => Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, "m").exec(stats)?.[1] ?? 0);
        return { scripts: of("evalsha"), hmget: of("hmget"), hgetall: of("hgetall"), sismember: of("sismember") };
      };
      const before = await calls();
      const again = dataOf(await held.gql<Feed>(likedOnly, { ids }, viewer.token)).posts;
      const after = await calls();
      expect(again).toEqual(first);
      expect(again.map((p) => p.viewerHasLiked)).toEqual(ids.map((_, i) => (i + 10) % 3 === 0));
      expect(after.scripts - before.scripts).toBe(1);
      expect(after.hmget - before.hmget + after.hgetall - before.hgetall).toBe(0);
      // The viewer's index of likes rules out the others: only the posts they liked are looked up.
      expect(after.sismember - before.sismember).toBe(ids.filter((_, i) => (i + 10) % 3 === 0).length);
    } finally {
      await held.close();
    }
  });
});
