// Field resolvers of the object types. Parents are the store records; list
// fields go through the request's loaders, never straight to a store.
import { decodeCursor, parsePageSize } from "../../domain/ids.js";
import { countOf, type Target } from "../../domain/targets.js";
import { forbidden } from "../../errors.js";
import type { CommentRecord, Page, PostRecord, UserRecord } from "../../stores/postgres/records.js";
import type { CounterHash } from "../../stores/redis/counter-hash.js";
import type { GraphQLResolveInfo } from "graphql";
import { idConnection } from "../connection.js";
import { prefetchCounts } from "../prefetch.js";
import type { Context } from "../context.js";

interface PageArgs {
  first: number;
  after?: string | null;
}

const id = (row: { id: bigint }) => row.id.toString();
const viewerHasLiked = (target: Target, ctx: Context) => (ctx.viewer ? ctx.loaders.liked.get(target) : false);
const counter = (name: string) => (hash: CounterHash) => countOf(hash.counts, name);

/** A page of comments as a connection, their counts prefetched when selected. */
async function commentConnection(
  args: PageArgs,
  ctx: Context,
  info: GraphQLResolveInfo,
  fetch: (first: number, before: bigint | null) => Promise<Page<CommentRecord>>,
) {
  const page = await fetch(parsePageSize(args.first), args.after ? decodeCursor(args.after) : null);
  await prefetchCounts(ctx, info, "comment", page.items.map((c) => c.id), ["edges", "node"]);
  return idConnection(page);
}

function author(row: { authorId: bigint }, _: unknown, ctx: Context) {
  return ctx.loaders.user.load(row.authorId);
}

export const Post = {
  id,
  author,
  counts: (post: PostRecord, _: unknown, ctx: Context) => ctx.loaders.counts.get({ type: "post", id: post.id }),
  viewerHasLiked: (post: PostRecord, _: unknown, ctx: Context) => viewerHasLiked({ type: "post", id: post.id }, ctx),
  async likers(post: PostRecord, args: PageArgs, ctx: Context) {
    const first = parsePageSize(args.first);
    const page = await ctx.services.likes.likers({ type: "post", id: post.id }, first, args.after ?? null);
    const users = await ctx.loaders.user.loadMany(page.likers.map((l) => l.userId));
    // A liker whose account row is gone is left out rather than failing the page.
    const edges = page.likers.flatMap((liker, i) => {
      const user = users[i];
      return user && !(user instanceof Error) ? [{ cursor: liker.cursor, node: user }] : [];
    });
    return { edges, pageInfo: { hasNextPage: page.hasMore, endCursor: page.likers.at(-1)?.cursor ?? null } };
  },
  comments: (post: PostRecord, args: PageArgs, ctx: Context, info: GraphQLResolveInfo) =>
    commentConnection(args, ctx, info, (first, before) => ctx.services.content.commentsOf(post.id, first, before)),
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
  post: (comment: CommentRecord, _: unknown, ctx: Context) => ctx.loaders.post.load(comment.postId),
  parent: (comment: CommentRecord, _: unknown, ctx: Context) =>
    comment.parentId === null ? null : ctx.loaders.comment.load(comment.parentId),
  counts: (comment: CommentRecord, _: unknown, ctx: Context) => ctx.loaders.counts.get({ type: "comment", id: comment.id }),
  viewerHasLiked: (comment: CommentRecord, _: unknown, ctx: Context) =>
    viewerHasLiked({ type: "comment", id: comment.id }, ctx),
  replies: (comment: CommentRecord, args: PageArgs, ctx: Context, info: GraphQLResolveInfo) =>
    commentConnection(args, ctx, info, (first, before) => ctx.services.content.repliesTo(comment.id, first, before)),
};

export const CommentCounts = {
  likes: counter("like"),
  replies: counter("reply"),
};

export const User = {
  id,
  email(user: UserRecord, _: unknown, ctx: Context) {
    if (ctx.viewer?.userId !== user.id) throw forbidden("Only the user themself may read their email.");
    return user.email;
  },
  counts: (user: UserRecord, _: unknown, ctx: Context) => ctx.loaders.counts.get({ type: "user", id: user.id }),
};

export const UserCounts = {
  followers: counter("followers"),
  following: counter("following"),
  posts: counter("posts"),
  likesReceived: counter("likesReceived"),
  collectsReceived: counter("collectsReceived"),
};
