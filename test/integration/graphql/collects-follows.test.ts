// Collecting posts and following users through GraphQL: idempotent and exact
// like likes, with their payloads, errors and the follower's own count.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../../src/stores/postgres/database.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { burstDeadlines, codesOf, createUsers, dataOf, itOnSingle, openDatabase, type TestUser } from "../../support/env.js";
import { eventually, startTestPipeline } from "../../support/pipeline.js";

let api: TestApi;
let db: Database;
let author: TestUser;

const collectPost = `mutation($id: ID!) { collectPost(postId: $id) { changed post { id counts { likes collects } viewerHasLiked viewerHasCollected } } }`;
const uncollectPost = `mutation($id: ID!) { uncollectPost(postId: $id) { changed post { id counts { collects } viewerHasCollected } } }`;
const followUser = `mutation($id: ID!) { followUser(userId: $id) { changed user { id counts { followers following } viewerFollows } } }`;
const unfollowUser = `mutation($id: ID!) { unfollowUser(userId: $id) { changed user { id counts { followers } viewerFollows } } }`;
type Collect = { changed: boolean; post: { id: string; counts: { likes?: number; collects: number }; viewerHasLiked?: boolean; viewerHasCollected: boolean } };
type Follow = { changed: boolean; user: { id: string; counts: { followers: number; following?: number }; viewerFollows: boolean } };

async function createPost(user = author): Promise<string> {
  return dataOf(await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "t", body: "b") { id } }`, {}, user.token)).createPost.id;
}

const collectsOf = async (postId: string) =>
  dataOf(await api.gql<{ post: { counts: { collects: number } } }>(`query($id: ID!) { post(id: $id) { counts { collects } } }`, { id: postId })).post.counts
    .collects;

const countsOf = async (userId: bigint) =>
  dataOf(
    await api.gql<{ user: { counts: { followers: number; following: number; collectsReceived: number } } }>(
      `query($id: ID!) { user(id: $id) { counts { followers following collectsReceived } } }`,
      { id: userId.toString() },
    ),
  ).user.counts;

beforeAll(async () => {
  api = await startTestApi(burstDeadlines);
  db = openDatabase(api.config);
  author = (await createUsers(db, api.config, 1))[0] as TestUser;
});
afterAll(async () => {
  await api.close();
  await db.$disconnect();
});

describe("collectPost and uncollectPost", () => {
  it("when 300 distinct users collect one post concurrently, then it counts 300", async () => {
    const postId = await createPost();
    const users = await createUsers(db, api.config, 300);
    const results = await Promise.all(users.map((u) => api.gql<{ collectPost: Collect }>(collectPost, { id: postId }, u.token)));
    expect(results.map((r) => dataOf(r).collectPost.changed).filter(Boolean)).toHaveLength(300);
    expect(await collectsOf(postId)).toBe(300);
  });

  it("when one user collects 50 times at once, then exactly one call changes and the count is 1", async () => {
    const postId = await createPost();
    const [user] = await createUsers(db, api.config, 1);
    const results = await Promise.all(Array.from({ length: 50 }, () => api.gql<{ collectPost: Collect }>(collectPost, { id: postId }, user?.token)));
    expect(results.filter((r) => dataOf(r).collectPost.changed)).toHaveLength(1);
    expect(results.every((r) => dataOf(r).collectPost.post.counts.collects === 1)).toBe(true);
    expect(await collectsOf(postId)).toBe(1);
  });

  it("when collects and uncollects interleave at random, then the count equals the users who collected it", async () => {
    const postId = await createPost();
    const users = await createUsers(db, api.config, 40);
    await Promise.all(
      Array.from({ length: 400 }, () => {
        const user = users[Math.floor(Math.random() * users.length)] as TestUser;
        return api.gql(Math.random() < 0.5 ? collectPost : uncollectPost, { id: postId }, user.token);
      }),
    );
    const states = await Promise.all(
      users.map(
        async (u) =>
          dataOf(await api.gql<{ post: { viewerHasCollected: boolean } }>(`query($id: ID!) { post(id: $id) { viewerHasCollected } }`, { id: postId }, u.token))
            .post.viewerHasCollected,
      ),
    );
    expect(await collectsOf(postId)).toBe(states.filter(Boolean).length);
  });

  it("when a user likes then collects a post, then the payload shows both counts and both of the viewer's marks", async () => {
    const postId = await createPost();
    const [user] = await createUsers(db, api.config, 1);
    await api.gql(`mutation($id: ID!) { likePost(postId: $id) { changed } }`, { id: postId }, user?.token);
    const first = dataOf(await api.gql<{ collectPost: Collect }>(collectPost, { id: postId }, user?.token)).collectPost;
    expect(first).toEqual({ changed: true, post: { id: postId, counts: { likes: 1, collects: 1 }, viewerHasLiked: true, viewerHasCollected: true } });
    const again = dataOf(await api.gql<{ collectPost: Collect }>(collectPost, { id: postId }, user?.token)).collectPost;
    expect(again).toMatchObject({ changed: false, post: { counts: { collects: 1 }, viewerHasCollected: true } });
    const undo = dataOf(await api.gql<{ uncollectPost: Collect }>(uncollectPost, { id: postId }, user?.token)).uncollectPost;
    expect(undo).toEqual({ changed: true, post: { id: postId, counts: { collects: 0 }, viewerHasCollected: false } });
  });

  itOnSingle("when an unknown post is collected, or a post without a token, then it is NOT_FOUND or UNAUTHENTICATED", async () => {
    const [user] = await createUsers(db, api.config, 1);
    expect(codesOf(await api.gql(collectPost, { id: "9100000000000000003" }, user?.token))).toEqual(["NOT_FOUND"]);
    expect(codesOf(await api.gql(collectPost, { id: await createPost() }))).toEqual(["UNAUTHENTICATED"]);
    expect(codesOf(await api.gql(collectPost, { id: "x1" }, user?.token))).toEqual(["BAD_USER_INPUT"]);
  });

  it("when a post is collected, then its author's collectsReceived follows once persisted, counted once", async () => {
    const [writer, fan] = await createUsers(db, api.config, 2);
    const postId = await createPost(writer);
    const pipeline = await startTestPipeline(api.config);
    try {
      await api.gql(collectPost, { id: postId }, fan?.token);
      await api.gql(collectPost, { id: postId }, fan?.token);
      await eventually(
        async () => (await countsOf(writer!.id)).collectsReceived === 1,
        30_000,
        async () => JSON.stringify(await countsOf(writer!.id)),
      );
      await api.gql(uncollectPost, { id: postId }, fan?.token);
      await eventually(
        async () => (await countsOf(writer!.id)).collectsReceived === 0,
        30_000,
        async () => JSON.stringify(await countsOf(writer!.id)),
      );
      expect(await db.collect.count({ where: { targetType: "post", targetId: BigInt(postId) } })).toBe(0);
    } finally {
      await pipeline.stop();
    }
  });
});

describe("followUser and unfollowUser", () => {
  it("when 300 distinct users follow one user concurrently, then its followers count 300 and each answer shows it", async () => {
    const [star] = await createUsers(db, api.config, 1);
    const fans = await createUsers(db, api.config, 300);
    const results = await Promise.all(fans.map((u) => api.gql<{ followUser: Follow }>(followUser, { id: star!.id.toString() }, u.token)));
    expect(results.map((r) => dataOf(r).followUser.changed).filter(Boolean)).toHaveLength(300);
    expect(results.every((r) => dataOf(r).followUser.user.viewerFollows)).toBe(true);
    expect(new Set(results.map((r) => dataOf(r).followUser.user.counts.followers)).size).toBe(300);
    expect((await countsOf(star!.id)).followers).toBe(300);
  });

  it("when one user follows another 50 times at once, then one call changes and followers is 1", async () => {
    const [star, fan] = await createUsers(db, api.config, 2);
    const results = await Promise.all(Array.from({ length: 50 }, () => api.gql<{ followUser: Follow }>(followUser, { id: star!.id.toString() }, fan?.token)));
    expect(results.filter((r) => dataOf(r).followUser.changed)).toHaveLength(1);
    expect((await countsOf(star!.id)).followers).toBe(1);
  });

  it("when follows and unfollows interleave at random, then followers equals the users who follow", async () => {
    const [star] = await createUsers(db, api.config, 1);
    const fans = await createUsers(db, api.config, 40);
    await Promise.all(
      Array.from({ length: 400 }, () => {
        const fan = fans[Math.floor(Math.random() * fans.length)] as TestUser;
        return api.gql(Math.random() < 0.5 ? followUser : unfollowUser, { id: star!.id.toString() }, fan.token);
      }),
    );
    const states = await Promise.all(
      fans.map(
        async (u) =>
          dataOf(
            await api.gql<{ user: { viewerFollows: boolean } }>(`query($id: ID!) { user(id: $id) { viewerFollows } }`, { id: star!.id.toString() }, u.token),
          ).user.viewerFollows,
      ),
    );
    expect((await countsOf(star!.id)).followers).toBe(states.filter(Boolean).length);
  });

  itOnSingle("when a user follows themself, an unknown user, or nobody is signed in, then it is BAD_USER_INPUT, NOT_FOUND or UNAUTHENTICATED", async () => {
    const [user] = await createUsers(db, api.config, 1);
    const self = await api.gql(followUser, { id: user!.id.toString() }, user?.token);
    expect(codesOf(self)).toEqual(["BAD_USER_INPUT"]);
    expect(self.errors?.[0]?.extensions?.field).toBe("userId");
    expect(codesOf(await api.gql(unfollowUser, { id: user!.id.toString() }, user?.token))).toEqual(["BAD_USER_INPUT"]);
    expect(codesOf(await api.gql(followUser, { id: "9100000000000000004" }, user?.token))).toEqual(["NOT_FOUND"]);
    expect(codesOf(await api.gql(followUser, { id: author.id.toString() }))).toEqual(["UNAUTHENTICATED"]);
  });

  it("when a user follows and unfollows, then the payload shows the followed user's count, and the follower's following follows once persisted", async () => {
    const [star, other, fan] = await createUsers(db, api.config, 3);
    const pipeline = await startTestPipeline(api.config);
    try {
      const first = dataOf(await api.gql<{ followUser: Follow }>(followUser, { id: star!.id.toString() }, fan?.token)).followUser;
      expect(first).toEqual({ changed: true, user: { id: star!.id.toString(), counts: { followers: 1, following: 0 }, viewerFollows: true } });
      await api.gql(followUser, { id: other!.id.toString() }, fan?.token);
      await eventually(
        async () => (await countsOf(fan!.id)).following === 2,
        30_000,
        async () => JSON.stringify(await countsOf(fan!.id)),
      );
      const undo = dataOf(await api.gql<{ unfollowUser: Follow }>(unfollowUser, { id: star!.id.toString() }, fan?.token)).unfollowUser;
      expect(undo).toEqual({ changed: true, user: { id: star!.id.toString(), counts: { followers: 0 }, viewerFollows: false } });
      await eventually(
        async () => (await countsOf(fan!.id)).following === 1,
        30_000,
        async () => JSON.stringify(await countsOf(fan!.id)),
      );
      expect(await db.follow.findMany({ where: { followerId: fan!.id }, select: { followeeId: true } })).toEqual([{ followeeId: other!.id }]);
      const persisted = await db.counter.findUnique({ where: { targetType_targetId_name: { targetType: "user", targetId: fan!.id, name: "following" } } });
      expect(persisted?.value).toBe(1n);
    } finally {
      await pipeline.stop();
    }
  });
});
