// Field resolvers of the object types. Parents are the model's entities; list
// fields go through the request's loaders, never straight to a service.
import { decodeCursor, parsePageSize } from "../../domain/ids.js";
import { decodeLikerCursor } from "../../domain/likes.js";
import {
  countOf,
  type Comment as CommentEntity,
  type CounterName,
  type Counts,
  type LikeableTarget,
  type Target,
  type TargetView,
  type Post as PostEntity,
  type User as UserEntity,
} from "../../domain/model.js";
import { forbidden } from "../../errors.js";
import type { GraphQLResolveInfo } from "graphql";
import { idConnection } from "../connection.js";
import { prefetchCounts } from "../prefetch.js";
import type { Context } from "../context.js";

interface PageArgs {
  first: number;
  after?: string | null;
}

const id = (row: { id: bigint }) => row.id.toString();

/** A target's view, read through `pick`: synchronously once its list prefetched it. */
function viewOf<R>(target: Target, ctx: Context, pick: (view: TargetView) => R): R | Promise<R> {
  const view = ctx.loaders.views.get(target);
  return view instanceof Promise ? view.then(pick) : pick(view);
}
const counts = (target: Target, ctx: Context) => viewOf(target, ctx, (v) => v.counts);
const viewerHasLiked = (target: LikeableTarget, ctx: Context) => (ctx.viewer ? viewOf(target, ctx, (v) => v.viewerLikes) : false);
const counter = (name: CounterName) => (counts: Counts) => countOf(counts, name);

/**
 * A page of comments as a connection, through a page loader so that every parent
 * of the level shares one SQL query; their counts, when selected, are then
 * prefetched for the whole level at once.
 */
async function commentConnection(
  parentId: bigint,
  args: PageArgs,
  ctx: Context,
  info: GraphQLResolveInfo,
  loader: Context["loaders"]["commentsOf"],
) {
  const limit = parsePageSize(args.first);
  const page = await loader.load({ parentId, limit, beforeId: args.after ? decodeCursor(args.after) : null });
  await prefetchCounts(ctx, info, "comment", page.items.map((c) => c.id), ["edges", "node"]);
  return idConnection(page);
}

function author(row: { authorId: bigint }, _: unknown, ctx: Context) {
  return ctx.loaders.user.load(row.authorId);
}

export const Post = {
  id,
  author,
  counts: (post: PostEntity, _: unknown, ctx: Context) => counts({ type: "post", id: post.id }, ctx),
  viewerHasLiked: (post: PostEntity, _: unknown, ctx: Context) => viewerHasLiked({ type: "post", id: post.id }, ctx),
  async likers(post: PostEntity, args: PageArgs, ctx: Context) {
    const first = parsePageSize(args.first);
    const cursor = args.after ?? null;
    const after = cursor === null ? null : decodeLikerCursor(cursor);
    const page = await ctx.loaders.likers.load({ target: { type: "post", id: post.id }, first, after });
    const users = await ctx.loaders.user.loadMany(page.likers.map((l) => l.userId));
    // A liker whose account row is gone is left out rather than failing the page.
    const edges = page.likers.flatMap((liker, i) => {
      const user = users[i];
      return user && !(user instanceof Error) ? [{ cursor: liker.cursor, node: user }] : [];
    });
    return { edges, pageInfo: { hasNextPage: page.hasMore, endCursor: page.likers.at(-1)?.cursor ?? null } };
  },
  comments: (post: PostEntity, args: PageArgs, ctx: Context, info: GraphQLResolveInfo) =>
    commentConnection(post.id, args, ctx, info, ctx.loaders.commentsOf),
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
  parent: (comment: CommentEntity, _: unknown, ctx: Context) =>
    comment.parentId === null ? null : ctx.loaders.comment.load(comment.parentId),
  counts: (comment: CommentEntity, _: unknown, ctx: Context) => counts({ type: "comment", id: comment.id }, ctx),
  viewerHasLiked: (comment: CommentEntity, _: unknown, ctx: Context) =>
    viewerHasLiked({ type: "comment", id: comment.id }, ctx),
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
};

export const UserCounts = {
  followers: counter("followers"),
  following: counter("following"),
  posts: counter("posts"),
  likesReceived: counter("likesReceived"),
  collectsReceived: counter("collectsReceived"),
};
