import { parseId } from "../../domain/ids.js";
import type { LikeableTarget } from "../../domain/model.js";
import type { Session } from "../../domain/users.js";
import { notFound } from "../../errors.js";
import { requireViewer, type Context } from "../context.js";
import { primeAfterLike } from "../loaders.js";

async function changeLike(ctx: Context, target: LikeableTarget, like: boolean) {
  const viewer = requireViewer(ctx);
  const { likes } = ctx.services;
  const outcome = await (like ? likes.like(target, viewer.userId) : likes.unlike(target, viewer.userId));
  primeAfterLike(ctx.loaders, target, outcome.counts, like);
  return outcome.changed;
}

async function existing<T>(row: Promise<T | null>, what: string, id: bigint): Promise<T> {
  const found = await row;
  if (!found) throw notFound(what, id);
  return found;
}

async function postLike(ctx: Context, rawId: string, like: boolean) {
  const id = parseId(rawId, "postId");
  const changed = await changeLike(ctx, { type: "post", id }, like);
  return { changed, post: await existing(ctx.loaders.post.load(id), "post", id) };
}

async function commentLike(ctx: Context, rawId: string, like: boolean) {
  const id = parseId(rawId, "commentId");
  const changed = await changeLike(ctx, { type: "comment", id }, like);
  return { changed, comment: await existing(ctx.loaders.comment.load(id), "comment", id) };
}

async function signIn(ctx: Context, session: Promise<Session>): Promise<Session> {
  const signedIn = await session;
  ctx.viewer = { userId: signedIn.user.id };
  return signedIn;
}

export const Mutation = {
  register: (_: unknown, args: { username: string; email: string; password: string }, ctx: Context) =>
    signIn(ctx, ctx.services.users.register(args.username, args.email, args.password)),
  login: (_: unknown, args: { username: string; password: string }, ctx: Context) =>
    signIn(ctx, ctx.services.users.login(args.username, args.password)),
  createPost: (_: unknown, args: { title: string; body: string }, ctx: Context) =>
    ctx.services.content.createPost(requireViewer(ctx).userId, args.title, args.body),
  createComment(_: unknown, args: { postId: string; body: string; parentId?: string | null }, ctx: Context) {
    const viewer = requireViewer(ctx);
    const postId = parseId(args.postId, "postId");
    const parentId = args.parentId ? parseId(args.parentId, "parentId") : null;
    return ctx.services.content.createComment(viewer.userId, postId, args.body, parentId);
  },
  likePost: (_: unknown, args: { postId: string }, ctx: Context) => postLike(ctx, args.postId, true),
  unlikePost: (_: unknown, args: { postId: string }, ctx: Context) => postLike(ctx, args.postId, false),
  likeComment: (_: unknown, args: { commentId: string }, ctx: Context) => commentLike(ctx, args.commentId, true),
  unlikeComment: (_: unknown, args: { commentId: string }, ctx: Context) => commentLike(ctx, args.commentId, false),
};
