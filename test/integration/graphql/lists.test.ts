// Each user's own lists: liked and collected posts (newest in Redis, older in
// PostgreSQL, one cursor across both), followers and following.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../../src/stores/postgres/database.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { createMembershipStore } from "../../../src/stores/redis/membership-store.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { codesOf, createUsers, dataOf, type GraphQLResponse, itOnSingle, openDatabase, openRedis, type TestUser } from "../../support/env.js";
import { eventually, startTestPipeline, type TestPipeline } from "../../support/pipeline.js";

let api: TestApi;
let db: Database;
let redis: RedisClient;
let author: TestUser;

type Page = { edges: { cursor: string; node: { id: string } }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } };

const likePost = `mutation($id: ID!) { likePost(postId: $id) { changed } }`;
const unlikePost = `mutation($id: ID!) { unlikePost(postId: $id) { changed } }`;
const collectPost = `mutation($id: ID!) { collectPost(postId: $id) { changed } }`;
const followUser = `mutation($id: ID!) { followUser(userId: $id) { changed } }`;

async function createPosts(count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    ids.push(
      dataOf(await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "t${i}", body: "b") { id } }`, {}, author.token)).createPost.id,
    );
  }
  return ids;
}

/** One page of a user's list, as `viewer` asks for it. */
function page(
  list: string,
  user: TestUser,
  viewer: TestUser | null,
  first: number,
  after: string | null,
): Promise<GraphQLResponse<{ user: Record<string, Page> }>> {
  return api.gql<{ user: Record<string, Page> }>(
    `query($id: ID!, $first: Int, $after: String) { user(id: $id) { ${list}(first: $first, after: $after) { edges { cursor node { id } } pageInfo { hasNextPage endCursor } } } }`,
    { id: user.id.toString(), first, after },
    viewer?.token,
  );
}

/** Every id of a user's list, walked page by page; fails on a repeat. */
async function walk(list: string, user: TestUser, first: number): Promise<string[]> {
  const seen: string[] = [];
  let after: string | null = null;
  for (let i = 0; i < 100; i++) {
    const { edges, pageInfo }: Page = dataOf(await page(list, user, user, first, after)).user[list] as Page;
    seen.push(...edges.map((e) => e.node.id));
    if (!pageInfo.hasNextPage) break;
    after = pageInfo.endCursor;
  }
  expect(new Set(seen).size).toBe(seen.length);
  return seen;
}

/** Each action, a few milliseconds apart, so their order is the order of their times. */
async function inTurn(actions: readonly (() => Promise<unknown>)[]): Promise<void> {
  for (const action of actions) {
    await action();
    await new Promise((r) => setTimeout(r, 3));
  }
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

/** Waits until the user's list walks as `expected` (the pipeline writes lists once a change is persisted). */
async function listBecomes(list: string, user: TestUser, first: number, expected: readonly (string | undefined)[]): Promise<void> {
  const want = JSON.stringify(expected);
  await eventually(
    async () => JSON.stringify(await walk(list, user, first)) === want,
    30_000,
    async () => `${list}: ${JSON.stringify(await walk(list, user, first))}, expected ${want}`,
  );
}

describe("likedPosts and collectedPosts", () => {
  let pipeline: TestPipeline;
  beforeAll(async () => {
    pipeline = await startTestPipeline(api.config);
  });
  afterAll(async () => {
    await pipeline.stop();
  });

  it("when a user likes posts, then likedPosts shows them once persisted, newest first, and an unlike takes one out once persisted", async () => {
    const [user] = (await createUsers(db, api.config, 1)) as [TestUser];
    const posts = await createPosts(5);
    await inTurn(posts.map((id) => () => api.gql(likePost, { id }, user.token)));
    await listBecomes("likedPosts", user, 2, [...posts].reverse());
    await api.gql(unlikePost, { id: posts[2] }, user.token);
    await listBecomes("likedPosts", user, 10, [posts[4], posts[3], posts[1], posts[0]]);
    // Liked again, it is the newest.
    await api.gql(likePost, { id: posts[2] }, user.token);
    await listBecomes("likedPosts", user, 10, [posts[2], posts[4], posts[3], posts[1], posts[0]]);
  });

  itOnSingle("when anyone else or nobody asks for a user's liked or collected posts, then it is FORBIDDEN", async () => {
    const [owner, other] = (await createUsers(db, api.config, 2)) as [TestUser, TestUser];
    for (const list of ["likedPosts", "collectedPosts"]) {
      expect(codesOf(await page(list, owner, other, 10, null))).toEqual(["FORBIDDEN"]);
      expect(codesOf(await page(list, owner, null, 10, null))).toEqual(["FORBIDDEN"]);
      expect(codesOf(await page(list, owner, owner, 10, null))).toEqual([]);
    }
  });

  it("when a user has liked more posts than Redis keeps, then pages walk every one once across the boundary, and unlikes on either side leave once persisted", async () => {
    const [user] = (await createUsers(db, api.config, 1)) as [TestUser];
    const posts = await createPosts(130);
    // The list is held in Redis before the likes, so the pipeline writes each into it.
    expect(await walk("likedPosts", user, 10)).toEqual([]);
    await inTurn(posts.map((id) => () => api.gql(likePost, { id }, user.token)));
    const newestFirst = [...posts].reverse();
    await eventually(
      async () => (await db.like.count({ where: { userId: user.id, targetType: "post" } })) === 130,
      30_000,
      () => "likes not persisted",
    );
    await listBecomes("likedPosts", user, 25, newestFirst);
    // Read from a list loaded anew from PostgreSQL (its 100 newest), the rest from PostgreSQL.
    await redis.del(...Object.values(createRedisKeys(api.config.redisPartitions).list("like", user.id)));
    for (const first of [7, 25, 100]) expect(await walk("likedPosts", user, first)).toEqual(newestFirst);
    // Unlike one Redis keeps and one only PostgreSQL holds: both leave.
    const [recent, old] = [posts[120] as string, posts[5] as string];
    await api.gql(unlikePost, { id: recent }, user.token);
    await api.gql(unlikePost, { id: old }, user.token);
    await listBecomes(
      "likedPosts",
      user,
      30,
      newestFirst.filter((id) => id !== recent && id !== old),
    );
  });

  it("when another process holds a user's list loading, then a page from PostgreSQL alone shows every persisted change", async () => {
    const [user] = (await createUsers(db, api.config, 1)) as [TestUser];
    const [kept, unliked, fresh] = (await createPosts(3)) as [string, string, string];
    await inTurn([kept, unliked].map((id) => () => api.gql(likePost, { id }, user.token)));
    await inTurn([() => api.gql(unlikePost, { id: unliked }, user.token), () => api.gql(likePost, { id: fresh }, user.token)]);
    await eventually(
      async () =>
        (await db.like.findMany({ where: { userId: user.id, targetType: "post" } }))
          .map((l) => l.targetId.toString())
          .sort()
          .join() === [kept, fresh].sort().join(),
      30_000,
      () => "changes not persisted",
    );
    const list = createRedisKeys(api.config.redisPartitions).list("like", user.id);
    await redis.del(list.entries, list.horizon);
    await redis.set(list.lock, "another process", "PX", 30_000);
    try {
      expect(await walk("likedPosts", user, 10)).toEqual([fresh, kept]);
    } finally {
      await redis.del(list.lock);
    }
  });

  it("when a user collects posts, then collectedPosts shows them newest first once persisted, apart from their likes", async () => {
    const [user] = (await createUsers(db, api.config, 1)) as [TestUser];
    const posts = await createPosts(4);
    await inTurn(posts.map((id, i) => () => api.gql(i % 2 ? collectPost : likePost, { id }, user.token)));
    await listBecomes("collectedPosts", user, 10, [posts[3], posts[1]]);
    await listBecomes("likedPosts", user, 10, [posts[2], posts[0]]);
  });

  it("when a list is held in Redis and the like script alone ran, then the persisted change reaches the list", async () => {
    const [user] = (await createUsers(db, api.config, 1)) as [TestUser];
    const [first, second] = await createPosts(2);
    await api.gql(likePost, { id: first }, user.token);
    await listBecomes("likedPosts", user, 10, [first]);
    // What the API sends for a like: the target's script, nothing in the user's slot.
    const memberships = createMembershipStore(redis, createRedisKeys(api.config.redisPartitions));
    expect(await memberships.add("like", { type: "post", id: BigInt(second as string) }, user.id)).toMatchObject({ changed: true });
    await listBecomes("likedPosts", user, 10, [second, first]);
    await memberships.remove("like", { type: "post", id: BigInt(first as string) }, user.id);
    await listBecomes("likedPosts", user, 10, [second]);
  });
});

describe("followers and following", () => {
  it("when users follow each other, then both lists page newest first once persisted", async () => {
    const users = await createUsers(db, api.config, 12);
    const [star, fan] = users as [TestUser, TestUser];
    const pipeline = await startTestPipeline(api.config);
    try {
      const fans = users.slice(1);
      const stars = users.filter((u) => u !== fan);
      await inTurn(fans.map((u) => () => api.gql(followUser, { id: star.id.toString() }, u.token)));
      await inTurn(stars.filter((u) => u !== star).map((u) => () => api.gql(followUser, { id: u.id.toString() }, fan.token)));
      await eventually(
        async () => (await db.follow.count({ where: { OR: [{ followeeId: star.id }, { followerId: fan.id }] } })) === fans.length + stars.length - 1,
        30_000,
        () => "follows not persisted",
      );
    } finally {
      await pipeline.stop();
    }
    const ids = (list: TestUser[]) => list.map((u) => u.id.toString()).reverse();
    expect(await walk("followers", star, 4)).toEqual(ids(users.slice(1)));
    // The fan followed the star first, then the others.
    expect(await walk("following", fan, 5)).toEqual(ids([star, ...users.slice(2)]));
    const anonymous = await page("followers", star, null, 3, null);
    expect(dataOf(anonymous).user.followers?.edges).toHaveLength(3);
  });
});
