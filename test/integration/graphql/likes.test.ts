import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../../src/stores/postgres/database.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { burstDeadlines, codesOf, createUsers, dataOf, type GraphQLResponse, itOnSingle, openDatabase, type TestUser } from "../../support/env.js";
import { eventually, startTestPipeline } from "../../support/pipeline.js";

let api: TestApi;
let db: Database;
let author: TestUser;

const likePost = `mutation($id: ID!) { likePost(postId: $id) { changed post { id counts { likes } viewerHasLiked } } }`;
const unlikePost = `mutation($id: ID!) { unlikePost(postId: $id) { changed post { id counts { likes } viewerHasLiked } } }`;
type LikeData = { likePost: { changed: boolean; post: { counts: { likes: number }; viewerHasLiked: boolean } } };
type UnlikeData = { unlikePost: { changed: boolean; post: { counts: { likes: number }; viewerHasLiked: boolean } } };

async function createPost(user = author): Promise<string> {
  const res = await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "t", body: "b") { id } }`, {}, user.token);
  return dataOf(res).createPost.id;
}

async function likesOf(postId: string): Promise<number> {
  const res = await api.gql<{ post: { counts: { likes: number } } }>(`query($id: ID!) { post(id: $id) { counts { likes } } }`, { id: postId });
  return dataOf(res).post.counts.likes;
}

beforeAll(async () => {
  api = await startTestApi(burstDeadlines);
  db = openDatabase(api.config);
  author = (await createUsers(db, api.config, 1))[0] as TestUser;
});
afterAll(async () => {
  await api.close();
  await db.$disconnect();
});

describe("likePost and unlikePost through GraphQL", () => {
  it("when 300 distinct users like one post concurrently, then it counts 300", async () => {
    const postId = await createPost();
    const users = await createUsers(db, api.config, 300);
    const results = await Promise.all(users.map((u) => api.gql<LikeData>(likePost, { id: postId }, u.token)));
    expect(results.map((r) => dataOf(r).likePost.changed).filter(Boolean)).toHaveLength(300);
    expect(await likesOf(postId)).toBe(300);
  });

  it("when one user likes 50 times at once, then exactly one call changes and the count is 1", async () => {
    const postId = await createPost();
    const [user] = await createUsers(db, api.config, 1);
    const results = await Promise.all(Array.from({ length: 50 }, () => api.gql<LikeData>(likePost, { id: postId }, user?.token)));
    expect(results.filter((r) => dataOf(r).likePost.changed)).toHaveLength(1);
    expect(results.every((r) => dataOf(r).likePost.post.counts.likes === 1)).toBe(true);
    expect(await likesOf(postId)).toBe(1);
  });

  it("when likes and unlikes interleave at random, then the count equals the users who like it", async () => {
    const postId = await createPost();
    const users = await createUsers(db, api.config, 40);
    const calls = Array.from({ length: 400 }, () => {
      const user = users[Math.floor(Math.random() * users.length)] as TestUser;
      return Math.random() < 0.5 ? api.gql<LikeData>(likePost, { id: postId }, user.token) : api.gql<UnlikeData>(unlikePost, { id: postId }, user.token);
    });
    await Promise.all(calls);
    const states = await Promise.all(
      users.map(async (u) => {
        const res = await api.gql<{ post: { viewerHasLiked: boolean } }>(`query($id: ID!) { post(id: $id) { viewerHasLiked } }`, { id: postId }, u.token);
        return dataOf(res).post.viewerHasLiked;
      }),
    );
    expect(await likesOf(postId)).toBe(states.filter(Boolean).length);
  });

  it("when a like changes nothing, then the payload says so and still shows the post", async () => {
    const postId = await createPost();
    const [user] = await createUsers(db, api.config, 1);
    const token = user?.token;
    const first = dataOf(await api.gql<LikeData>(likePost, { id: postId }, token)).likePost;
    const again = dataOf(await api.gql<LikeData>(likePost, { id: postId }, token)).likePost;
    const undo = dataOf(await api.gql<UnlikeData>(unlikePost, { id: postId }, token)).unlikePost;
    const undoAgain = dataOf(await api.gql<UnlikeData>(unlikePost, { id: postId }, token)).unlikePost;
    expect(first).toEqual({ changed: true, post: { id: postId, counts: { likes: 1 }, viewerHasLiked: true } });
    expect(again).toEqual({ changed: false, post: { id: postId, counts: { likes: 1 }, viewerHasLiked: true } });
    expect(undo).toEqual({ changed: true, post: { id: postId, counts: { likes: 0 }, viewerHasLiked: false } });
    expect(undoAgain).toEqual({ changed: false, post: { id: postId, counts: { likes: 0 }, viewerHasLiked: false } });
  });

  it("when a post is liked, then its author's likesReceived follows once the like is persisted, counted once", async () => {
    const [writer, fan] = await createUsers(db, api.config, 2);
    const postId = await createPost(writer);
    const received = async () =>
      dataOf(
        await api.gql<{ user: { counts: { likesReceived: number } } }>(`query($id: ID!) { user(id: $id) { counts { likesReceived } } }`, {
          id: writer?.id.toString(),
        }),
      ).user.counts.likesReceived;
    expect(await received()).toBe(0);
    const pipeline = await startTestPipeline(api.config);
    try {
      await api.gql(likePost, { id: postId }, fan?.token);
      await api.gql(likePost, { id: postId }, fan?.token);
      await eventually(
        async () => (await received()) === 1,
        30_000,
        async () => `likesReceived ${await received()}`,
      );
      await api.gql(unlikePost, { id: postId }, fan?.token);
      await eventually(
        async () => (await received()) === 0,
        30_000,
        async () => `likesReceived ${await received()}`,
      );
      const persisted = await db.counter.findUnique({
        where: { targetType_targetId_name: { targetType: "user", targetId: writer!.id, name: "likesReceived" } },
      });
      expect(persisted?.value).toBe(0n);
    } finally {
      await pipeline.stop();
    }
  });

  itOnSingle("when an unknown post is liked repeatedly, then each answer is NOT_FOUND and PostgreSQL is asked once", async () => {
    const [user] = await createUsers(db, api.config, 1);
    const unknown = "9100000000000000001";
    const first = await api.gql(likePost, { id: unknown }, user?.token);
    const before = api.sqlQueries();
    const repeats = await Promise.all(Array.from({ length: 20 }, () => api.gql(likePost, { id: unknown }, user?.token)));
    expect(codesOf(first)).toEqual(["NOT_FOUND"]);
    expect(repeats.every((r) => codesOf(r)[0] === "NOT_FOUND")).toBe(true);
    expect(api.sqlQueries() - before).toBe(0);
  });

  it("when comments are liked, then their counts and viewerHasLiked follow", async () => {
    const postId = await createPost();
    const [a, b] = await createUsers(db, api.config, 2);
    const comment = dataOf(
      await api.gql<{ createComment: { id: string } }>(`mutation($p: ID!) { createComment(postId: $p, body: "hi") { id } }`, { p: postId }, author.token),
    ).createComment.id;
    const like = `mutation($id: ID!) { likeComment(commentId: $id) { changed comment { counts { likes } viewerHasLiked } } }`;
    const unlike = `mutation($id: ID!) { unlikeComment(commentId: $id) { changed comment { counts { likes } viewerHasLiked } } }`;
    expect(dataOf(await api.gql(like, { id: comment }, a?.token))).toEqual({
      likeComment: { changed: true, comment: { counts: { likes: 1 }, viewerHasLiked: true } },
    });
    expect(dataOf(await api.gql(like, { id: comment }, b?.token))).toEqual({
      likeComment: { changed: true, comment: { counts: { likes: 2 }, viewerHasLiked: true } },
    });
    expect(dataOf(await api.gql(like, { id: comment }, b?.token))).toEqual({
      likeComment: { changed: false, comment: { counts: { likes: 2 }, viewerHasLiked: true } },
    });
    expect(dataOf(await api.gql(unlike, { id: comment }, a?.token))).toEqual({
      unlikeComment: { changed: true, comment: { counts: { likes: 1 }, viewerHasLiked: false } },
    });
    expect(codesOf(await api.gql(like, { id: "9100000000000000002" }, a?.token))).toEqual(["NOT_FOUND"]);
  });

  it("when likers are paged after the likes are persisted, then every liker appears once, newest first", async () => {
    const postId = await createPost();
    const users = await createUsers(db, api.config, 45);
    const pipeline = await startTestPipeline(api.config);
    try {
      for (const u of users) {
        await api.gql(likePost, { id: postId }, u.token);
        // Likes a few milliseconds apart, so their order is their time.
        await new Promise((r) => setTimeout(r, 3));
      }
      await eventually(
        async () => (await db.like.count({ where: { targetType: "post", targetId: BigInt(postId) } })) === 45,
        30_000,
        () => "likes not persisted",
      );
    } finally {
      await pipeline.stop();
    }
    const seen: string[] = [];
    let after: string | null = null;
    for (let page = 0; page < 10; page++) {
      type LikersPage = { post: { likers: { edges: { node: { id: string } }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } } };
      const res: GraphQLResponse<LikersPage> = await api.gql<LikersPage>(
        `query($id: ID!, $after: String) { post(id: $id) { likers(first: 20, after: $after) { edges { node { id } } pageInfo { hasNextPage endCursor } } } }`,
        { id: postId, after },
      );
      const likers = dataOf(res).post.likers;
      seen.push(...likers.edges.map((e) => e.node.id));
      if (!likers.pageInfo.hasNextPage) break;
      after = likers.pageInfo.endCursor;
    }
    expect(seen).toEqual(users.map((u) => u.id.toString()).reverse());
  });
});
