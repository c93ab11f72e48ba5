import { parseId } from "../../domain/ids.js";
import type { Relation, Target } from "../../domain/model.js";
import type { Session } from "../../domain/users.js";
import { notFound } from "../../errors.js";
import { requireViewer, type Context } from "../context.js";
import { primeAfterChange } from "../loaders.js";

/** Joins or leaves the target's relation as the viewer; the payload's counts come from the change itself. */
async function change(ctx: Context, relation: Relation, target: Target, join: boolean) {
  const viewer = requireViewer(ctx);
  const { memberships } = ctx.services;
  const outcome = await (join ? memberships.join(relation, target, viewer.userId) : memberships.leave(relation, target, viewer.userId));
  primeAfterChange(ctx.loaders, target, outcome.counts, relation, join);
  return outcome.changed;
}

async function existing<T>(row: Promise<T | null>, what: string, id: bigint): Promise<T> {
  const found = await row;
  if (!found) throw notFound(what, id);
  return found;
}

async function onPost(ctx: Context, rawId: string, relation: Relation, join: boolean) {
  const id = parseId(rawId, "postId");
  const changed = await change(ctx, relation, { type: "post", id }, join);
  return { changed, post: await existing(ctx.loaders.post.load(id), "post", id) };
}

async function onComment(ctx: Context, rawId: string, join: boolean) {
  const id = parseId(rawId, "commentId");
  const changed = await change(ctx, "like", { type: "comment", id }, join);
  return { changed, comment: await existing(ctx.loaders.comment.load(id), "comment", id) };
}

async function onUser(ctx: Context, rawId: string, join: boolean) {
  const id = parseId(rawId, "userId");
  const changed = await change(ctx, "follow", { type: "user", id }, join);
  return { changed, user: await existing(ctx.loaders.user.load(id), "user", id) };
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
  likePost: (_: unknown, args: { postId: string }, ctx: Context) => onPost(ctx, args.postId, "like", true),
  unlikePost: (_: unknown, args: { postId: string }, ctx: Context) => onPost(ctx, args.postId, "like", false),
  likeComment: (_: unknown, args: { commentId: string }, ctx: Context) => onComment(ctx, args.commentId, true),
  unlikeComment: (_: unknown, args: { commentId: string }, ctx: Context) => onComment(ctx, args.commentId, false),
  collectPost: (_: unknown, args: { postId: string }, ctx: Context) => onPost(ctx, args.postId, "collect", true),
  uncollectPost: (_: unknown, args: { postId: string }, ctx: Context) => onPost(ctx, args.postId, "collect", false),
  followUser: (_: unknown, args: { userId: string }, ctx: Context) => onUser(ctx, args.userId, true),
  unfollowUser: (_: unknown, args: { userId: string }, ctx: Context) => onUser(ctx, args.userId, false),
  // The view service refuses more than its maximum of ids, which the variables limit keeps small enough to parse first.
  recordViews: (_: unknown, args: { postIds: string[] }, ctx: Context) => ctx.services.views.record(args.postIds.map((id) => parseId(id, "postIds"))),
};
