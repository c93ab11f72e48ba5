// Nested connections (comments, replies, likers) under a feed: each level loads
// with one SQL query whatever the number of parents, and answers exactly what
// each parent's own page holds, read here straight from PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MemberPosition } from "../../../src/domain/model/index.js";
import { encodeCursor, encodeMemberCursor } from "../../../src/graphql/cursors.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { createUsers, dataOf, openDatabase, openRedis, type TestUser } from "../../support/env.js";

let api: TestApi;
let db: Database;
let redis: RedisClient;
let author: TestUser;
let likers: TestUser[];
let postIds: bigint[];
let commentIds: bigint[];
let replyIds: bigint[];
let likesBase: number;

const postCount = 100;

interface PageShape<N> {
  edges: { cursor: string; node: N }[];
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
}
type Reply = { id: string };
type CommentNode = { id: string; counts: { replies: number }; replies: PageShape<Reply> };
type PostNode = { id: string; likers: PageShape<{ id: string }>; comments: PageShape<CommentNode> };
type Feed = { feed: { edges: { node: PostNode }[] } };

const feedQuery = `query($n: Int!, $ca: String, $ra: String, $la: String) {
  feed(first: $n) { edges { node { id
    likers(first: 2, after: $la) { edges { cursor node { id } } pageInfo { hasNextPage endCursor } }
    comments(first: 2, after: $ca) {
      edges { cursor node { id counts { replies }
        replies(first: 2, after: $ra) { edges { cursor node { id } } pageInfo { hasNextPage endCursor } } } }
      pageInfo { hasNextPage endCursor } } } } } }`;

async function inChunks<T>(items: readonly T[], run: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += 10) await Promise.all(items.slice(i, i + 10).map(run));
}

const createComment = async (postId: bigint, parentId: bigint | null) =>
  BigInt(
    dataOf(
      await api.gql<{ createComment: { id: string } }>(
        `mutation($p: ID!, $parent: ID) { createComment(postId: $p, body: "c", parentId: $parent) { id } }`,
        { p: postId.toString(), parent: parentId?.toString() ?? null },
        author.token,
      ),
    ).createComment.id,
  );

/** A page as the old per-parent code built it: newest first, first + 1 rows to learn hasNextPage. */
function idPage(rows: readonly { id: bigint }[], first: number): PageShape<Reply> {
  const edges = rows.slice(0, first).map((r) => ({ cursor: encodeCursor(r.id), node: { id: r.id.toString() } }));
  return { edges, pageInfo: { hasNextPage: rows.length > first, endCursor: edges.at(-1)?.cursor ?? null } };
}

const beforeId = (before: bigint | null) => (before === null ? {} : { id: { lt: before } });

async function expectedComments(postId: bigint, first: number, before: bigint | null) {
  const rows = await db.comment.findMany({ where: { postId, parentId: null, ...beforeId(before) }, orderBy: { id: "desc" }, take: first + 1 });
  return idPage(rows, first);
}

async function expectedReplies(parentId: bigint, first: number, before: bigint | null) {
  const rows = await db.comment.findMany({ where: { parentId, ...beforeId(before) }, orderBy: { id: "desc" }, take: first + 1 });
  return { page: idPage(rows, first), total: await db.comment.count({ where: { parentId } }) };
}

async function expectedLikers(postId: bigint, first: number, after: MemberPosition | null): Promise<PageShape<{ id: string }>> {
  const rows = await db.like.findMany({
    where: {
      targetType: "post",
      targetId: postId,
      ...(after && { OR: [{ createdAt: { lt: after.at } }, { createdAt: after.at, userId: { lt: after.userId } }] }),
    },
    orderBy: [{ createdAt: "desc" }, { userId: "desc" }],
    take: first + 1,
  });
  const edges = rows.slice(0, first).map((r) => ({ cursor: encodeMemberCursor({ at: r.createdAt, userId: r.userId }), node: { id: r.userId.toString() } }));
  return { edges, pageInfo: { hasNextPage: rows.length > first, endCursor: edges.at(-1)?.cursor ?? null } };
}

/** The feed's answer, checked parent by parent against PostgreSQL. */
async function expectFeedMatches(feed: Feed, cursors: { comments: bigint | null; replies: bigint | null; likers: MemberPosition | null }) {
  const posts = feed.feed.edges.map((e) => e.node);
  expect(posts.map((p) => p.id)).toEqual(postIds.map(String).reverse());
  for (const post of posts) {
    expect(post.likers).toEqual(await expectedLikers(BigInt(post.id), 2, cursors.likers));
    const comments = await expectedComments(BigInt(post.id), 2, cursors.comments);
    expect(post.comments.edges.map(({ cursor, node }) => ({ cursor, node: { id: node.id } }))).toEqual(comments.edges);
    expect(post.comments.pageInfo).toEqual(comments.pageInfo);
    for (const { node } of post.comments.edges) {
      const replies = await expectedReplies(BigInt(node.id), 2, cursors.replies);
      expect(node.replies).toEqual(replies.page);
      expect(node.counts.replies).toBe(replies.total);
    }
  }
}

async function readsProcessed(): Promise<number> {
  return Number(/total_reads_processed:(\d+)/.exec(await redis.info("stats"))?.[1]);
}

beforeAll(async () => {
  // Queries here fan out past MAX_QUERY_COST on purpose: one SQL query per level must
  // hold whatever the fan-out. Budgets off, so counting Redis round trips sees only the reads.
  api = await startTestApi({ MAX_QUERY_COST: "10000000", RATE_LIMITS: "off", HOT_COUNTS_TARGETS: "0" });
  db = openDatabase(api.config);
  redis = await openRedis();
  [author, ...likers] = (await createUsers(db, api.config, 6)) as [TestUser, ...TestUser[]];
  postIds = [];
  for (let i = 0; i < postCount; i++) {
    const res = await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "p${i}", body: "b") { id } }`, {}, author.token);
    postIds.push(BigInt(dataOf(res).createPost.id));
  }
  // Post i gets i % 4 comments, comment j gets j % 4 replies: some parents have none, some fill a page and more.
  commentIds = [];
  await inChunks(postIds, async (postId) => {
    for (let c = 0; c < Number(postId % 4n); c++) commentIds.push(await createComment(postId, null));
  });
  replyIds = [];
  await inChunks(commentIds, async (commentId) => {
    const postId = (await db.comment.findUniqueOrThrow({ where: { id: commentId } })).postId;
    for (let r = 0; r < Number(commentId % 4n); r++) replyIds.push(await createComment(postId, commentId));
  });
  // Likers are read from PostgreSQL's likes table, which the pipeline fills; written here directly,
  // with likes sharing a time so that the user id decides their order.
  likesBase = Date.now() - 60_000;
  await db.like.createMany({
    data: postIds.flatMap((postId, i) =>
      likers.slice(0, i % (likers.length + 1)).map((user, u) => ({
        targetType: "post",
        targetId: postId,
        userId: user.id,
        createdAt: new Date(likesBase + Math.floor(u / 2) * 1000),
      })),
    ),
  });
});
afterAll(async () => {
  await api.close();
  await db.$disconnect();
  await redis.quit();
});

describe("nested connections under a feed", () => {
  it("when a feed of posts selects likers, comments and their replies, then every parent's page is its own, first pages and after cursors alike", async () => {
    const noCursors = { comments: null, replies: null, likers: null };
    await expectFeedMatches(dataOf(await api.gql<Feed>(feedQuery, { n: postCount })), noCursors);

    // One cursor for every parent of a level: each parent pages on from it in its own rows.
    const sortedComments = [...commentIds].sort((a, b) => (a < b ? -1 : 1));
    const sortedReplies = [...replyIds].sort((a, b) => (a < b ? -1 : 1));
    // Between the two likes that share the middle time: the older-id one follows, the newer-id one does not.
    const likerAfter = { at: new Date(likesBase + 1000), userId: (likers[3] as TestUser).id };
    const cursors = {
      comments: sortedComments[Math.floor(sortedComments.length * 0.6)] ?? null,
      replies: sortedReplies[Math.floor(sortedReplies.length * 0.6)] ?? null,
      likers: likerAfter,
    };
    const variables = {
      n: postCount,
      ca: cursors.comments && encodeCursor(cursors.comments),
      ra: cursors.replies && encodeCursor(cursors.replies),
      la: encodeMemberCursor(cursors.likers),
    };
    await expectFeedMatches(dataOf(await api.gql<Feed>(feedQuery, variables)), cursors);
  });

  it("when a feed of posts selects likers, comments and replies, then each level costs one SQL query however many parents", async () => {
    // The first run fills the process's row caches (likers' accounts); the second counts the levels alone.
    await api.gql<Feed>(feedQuery, { n: postCount });
    const before = api.sqlQueries();
    dataOf(await api.gql<Feed>(feedQuery, { n: postCount }));
    // feed, likers, comments, replies
    expect(api.sqlQueries() - before).toBe(4);
  });

  it("when a feed of 100 posts asks 100 comments each with 10 replies each, then it costs three SQL queries", async () => {
    const query = `{ feed(first: 100) { edges { node { id comments(first: 100) { edges { node { id replies(first: 10) { edges { node { id } } } } } } } } } }`;
    await api.gql(query);
    const before = api.sqlQueries();
    const feed = dataOf(await api.gql<{ feed: { edges: { node: { comments: { edges: { node: { replies: { edges: unknown[] } } }[] } } }[] } }>(query)).feed;
    const comments = feed.edges.flatMap((e) => e.node.comments.edges);
    expect(comments).toHaveLength(commentIds.length);
    expect(comments.flatMap((c) => c.node.replies.edges)).toHaveLength(replyIds.length);
    expect(api.sqlQueries() - before).toBe(3);
  });

  it("when comments lead back to their post and its comments again, then each level still costs one SQL query", async () => {
    const query = `{ feed(first: 100) { edges { node { comments(first: 100) { edges { node { post { id comments(first: 50) { edges { node { id } } } } } } } } } } }`;
    await api.gql(query);
    const before = api.sqlQueries();
    const feed = dataOf(
      await api.gql<{ feed: { edges: { node: { comments: { edges: { node: { post: { comments: { edges: unknown[] } } } }[] } } }[] } }>(query),
    ).feed;
    // Every comment's post shows the post's own comments again.
    const inner = feed.edges.flatMap((e) => e.node.comments.edges.map((c) => c.node.post.comments.edges.length));
    expect(inner).toEqual(feed.edges.flatMap((e) => e.node.comments.edges.map(() => e.node.comments.edges.length)));
    // feed, comments, comments again (a page size of their own, so the request's loader cannot answer
    // them from the first level); the posts come from the process's row cache after the first run.
    expect(api.sqlQueries() - before).toBe(3);
  });

  it("when comments of many posts select counts, then the whole level's counts come in one Redis round trip", async () => {
    const query = `query($n: Int!) { feed(first: $n) { edges { node { counts { comments } comments(first: 5) { edges { node { counts { likes replies } viewerHasLiked } } } } } } }`;
    const trips = async (n: number) => {
      await api.gql(query, { n }, author.token);
      // The first read asks for the author's member index of liked comments; its load's calls must not be counted.
      await api.memberIndexes?.idle();
      const before = await readsProcessed();
      dataOf(await api.gql(query, { n }, author.token));
      return (await readsProcessed()) - before - 1;
    };
    // Posts 4k+1, 4k+2 and 4k+3 have comments: four posts hold two parents with comments, a hundred hold seventy-five.
    const few = await trips(4);
    const many = await trips(postCount);
    expect(many).toBe(few);
    expect(few).toBe(2);
  });
});
