// Field resolvers of the object types. Parents are the model's entities; a list
// field's page goes through the request's loaders (one read for every parent of a
// level), and the entities a page names are read from the catalog in one call.
import type { ListPage } from "../../domain/lists.js";
import type { MembersPage } from "../../domain/memberships.js";
import {
  countOf,
  type Comment as CommentEntity,
  type CounterName,
  type Counts,
  type Relation,
  type Target,
  type TargetReadout,
  type Post as PostEntity,
  type User as UserEntity,
} from "../../domain/model/index.js";
import { forbidden } from "../../errors.js";
import type { GraphQLResolveInfo } from "graphql";
import { parsePageSize } from "../arguments.js";
import { idConnection } from "../connection.js";
import { decodeCursor, decodeListCursor, decodeMemberCursor, encodeListCursor, encodeMemberCursor } from "../cursors.js";
import { prefetchCounts } from "../prefetch.js";
import type { Context } from "../context.js";

interface PageArgs {
  first: number;
  after?: string | null;
}

const id = (row: { id: bigint }) => row.id.toString();

/** A target's readout, read through `pick`: synchronously once its list prefetched it. */
function readoutOf<R>(target: Target, ctx: Context, pick: (readout: TargetReadout) => R): R | Promise<R> {
  const readout = ctx.loaders.readouts.get(target);
  return readout instanceof Promise ? readout.then(pick) : pick(readout);
}
const counts = (target: Target, ctx: Context) => readoutOf(target, ctx, (v) => v.counts);

/** Whether the viewer is a member of the target's relation; read again when the request's readout of it does not tell. */
function viewerIn(target: Target, relation: Relation, ctx: Context): boolean | Promise<boolean> {
  if (!ctx.viewer) return false;
  const known = readoutOf(target, ctx, (v) => v.viewerIn[relation]);
  const settle = (member: boolean | undefined) => member ?? ctx.loaders.fullReadouts.load(target).then((v) => v.viewerIn[relation] ?? false);
  return known instanceof Promise ? known.then(settle) : settle(known);
}
const counter = (name: CounterName) => (counts: Counts) => countOf(counts, name);

/**
 * A page of comments as a connection, through a page loader so that every parent
 * of the level shares one SQL query; their counts, when selected, are then
 * prefetched for the whole level at once.
 */
async function commentConnection(parentId: bigint, args: PageArgs, ctx: Context, info: GraphQLResolveInfo, loader: Context["loaders"]["commentsOf"]) {
  const limit = parsePageSize(args.first);
  const page = await loader.load({ parentId, limit, beforeId: args.after ? decodeCursor(args.after) : null });
  await prefetchCounts(
    ctx,
    info,
    "comment",
    page.items.map((c) => c.id),
    ["edges", "node"],
  );
  return idConnection(page);
}

function author(row: { authorId: bigint }, _: unknown, ctx: Context) {
  return ctx.loaders.user.load(row.authorId);
}

/** A page of users (likers, followers, followed) as a connection, their views prefetched when selected. */
async function userConnection(entries: readonly { userId: bigint; cursor: string }[], hasMore: boolean, ctx: Context, info: GraphQLResolveInfo) {
  const users = await ctx.loaders.user.loadMany(entries.map((e) => e.userId));
  // A user whose account row is gone is left out rather than failing the page.
  const edges = entries.flatMap((entry, i) => {
    const user = users[i];
    return user && !(user instanceof Error) ? [{ cursor: entry.cursor, node: user }] : [];
  });
  await prefetchCounts(
    ctx,
    info,
    "user",
    edges.map((e) => e.node.id),
    ["edges", "node"],
  );
  return { edges, pageInfo: { hasNextPage: hasMore, endCursor: entries.at(-1)?.cursor ?? null } };
}

async function membersConnection(relation: Relation, target: Target, args: PageArgs, ctx: Context, info: GraphQLResolveInfo) {
  const first = parsePageSize(args.first);
  const after = args.after ? decodeMemberCursor(args.after) : null;
  const page: MembersPage = await ctx.loaders.members.load({ relation, target, first, after });
  return userConnection(
    page.members.map((m) => ({ userId: m.userId, cursor: encodeMemberCursor(m) })),
    page.hasMore,
    ctx,
    info,
  );
}

async function listPage(relation: Relation, user: UserEntity, args: PageArgs, ctx: Context): Promise<ListPage> {
  const first = parsePageSize(args.first);
  const after = args.after ? decodeListCursor(args.after) : null;
  return ctx.loaders.lists.load({ relation, userId: user.id, first, after });
}

/** A user's private list of posts: only the user themself may read it. */
async function postList(relation: "like" | "collect", user: UserEntity, args: PageArgs, ctx: Context, info: GraphQLResolveInfo) {
  if (ctx.viewer?.userId !== user.id) throw forbidden(`Only the user themself may read their ${relation === "like" ? "liked" : "collected"} posts.`);
  const page = await listPage(relation, user, args, ctx);
  const posts = await ctx.services.catalog.posts(page.entries.map((e) => e.targetId));
  const cursors = page.entries.map(encodeListCursor);
  const edges = page.entries.flatMap((_, i) => {
    const post = posts[i];
    return post ? [{ cursor: cursors[i] as string, node: post }] : [];
  });
  await prefetchCounts(
    ctx,
    info,
    "post",
    edges.map((e) => e.node.id),
    ["edges", "node"],
  );
  return { edges, pageInfo: { hasNextPage: page.hasMore, endCursor: cursors.at(-1) ?? null } };
}

export const Post = {
  id,
  author,
  counts: (post: PostEntity, _: unknown, ctx: Context) => counts({ type: "post", id: post.id }, ctx),
  viewerHasLiked: (post: PostEntity, _: unknown, ctx: Context) => viewerIn({ type: "post", id: post.id }, "like", ctx),
  viewerHasCollected: (post: PostEntity, _: unknown, ctx: Context) => viewerIn({ type: "post", id: post.id }, "collect", ctx),
  likers: (post: PostEntity, args: PageArgs, ctx: Context, info: GraphQLResolveInfo) =>
    membersConnection("like", { type: "post", id: post.id }, args, ctx, info),
  comments: (post: PostEntity, args: PageArgs, ctx: Context, info: GraphQLResolveInfo) => commentConnection(post.id, args, ctx, info, ctx.loaders.commentsOf),
};

export const PostCounts = {
  likes: counter("like"),
  reads: counter("read"),
  comments: counter("comment"),
  collects: counter("collect"),
};

export const Comment = {
  id,
  author,
  post: (comment: CommentEntity, _: unknown, ctx: Context) => ctx.loaders.post.load(comment.postId),
  parent: (comment: CommentEntity, _: unknown, ctx: Context) => (comment.parentId === null ? null : ctx.loaders.comment.load(comment.parentId)),
  counts: (comment: CommentEntity, _: unknown, ctx: Context) => counts({ type: "comment", id: comment.id }, ctx),
  viewerHasLiked: (comment: CommentEntity, _: unknown, ctx: Context) => viewerIn({ type: "comment", id: comment.id }, "like", ctx),
  replies: (comment: CommentEntity, args: PageArgs, ctx: Context, info: GraphQLResolveInfo) =>
    commentConnection(comment.id, args, ctx, info, ctx.loaders.repliesTo),
};

export const CommentCounts = {
  likes: counter("like"),
  replies: counter("reply"),
};

export const User = {
  id,
  email(user: UserEntity, _: unknown, ctx: Context) {
    if (ctx.viewer?.userId !== user.id) throw forbidden("Only the user themself may read their email.");
    return user.email;
  },
  counts: (user: UserEntity, _: unknown, ctx: Context) => counts({ type: "user", id: user.id }, ctx),
  viewerFollows: (user: UserEntity, _: unknown, ctx: Context) => viewerIn({ type: "user", id: user.id }, "follow", ctx),
  followers: (user: UserEntity, args: PageArgs, ctx: Context, info: GraphQLResolveInfo) =>
    membersConnection("follow", { type: "user", id: user.id }, args, ctx, info),
  async following(user: UserEntity, args: PageArgs, ctx: Context, info: GraphQLResolveInfo) {
    const page = await listPage("follow", user, args, ctx);
    return userConnection(
      page.entries.map((e) => ({ userId: e.targetId, cursor: encodeListCursor(e) })),
      page.hasMore,
      ctx,
      info,
    );
  },
  likedPosts: (user: UserEntity, args: PageArgs, ctx: Context, info: GraphQLResolveInfo) => postList("like", user, args, ctx, info),
  collectedPosts: (user: UserEntity, args: PageArgs, ctx: Context, info: GraphQLResolveInfo) => postList("collect", user, args, ctx, info),
};

export const UserCounts = {
  followers: counter("followers"),
  following: counter("following"),
  posts: counter("posts"),
  likesReceived: counter("likesReceived"),
  collectsReceived: counter("collectsReceived"),
};
