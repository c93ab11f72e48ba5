import { parseId } from "../arguments.js";
import type { GraphQLResolveInfo } from "graphql";
import type { Relation, Target, TargetType } from "../../domain/model/index.js";
import type { Session } from "../../domain/users.js";
import { notFound } from "../../errors.js";
import { requireViewer, type Context } from "../context.js";
import { selectsOnly } from "../look-ahead.js";
import { primeAfterChange } from "../loaders.js";

/** Joins or leaves the target's relation as the viewer; the payload's counts come from the change itself. */
async function change(ctx: Context, relation: Relation, target: Target, join: boolean) {
  const viewer = requireViewer(ctx);
  const { memberships } = ctx.services;
  const outcome = await (join
    ? memberships.join(relation, target, viewer.userId, ctx.deadlineAtMs)
    : memberships.leave(relation, target, viewer.userId, ctx.deadlineAtMs));
  primeAfterChange(ctx.loaders, target, outcome.counts, relation, join);
  return outcome.changed;
}

async function existing<T>(row: Promise<T | null>, what: string, id: bigint): Promise<T> {
  const found = await row;
  if (!found) throw notFound(what, id);
  return found;
}

/**
 * The fields of each type that its id alone answers: its view (counts, the
 * viewer's memberships) and its connections. A payload that selects only these
 * needs no row, so a change of a target this process never read sends no SQL;
 * the change itself proved the target exists.
 */
const answeredById: Readonly<Record<TargetType, ReadonlySet<string>>> = {
  post: new Set(["__typename", "id", "counts", "viewerHasLiked", "viewerHasCollected", "likers", "comments"]),
  comment: new Set(["__typename", "id", "counts", "viewerHasLiked", "replies"]),
  user: new Set(["__typename", "id", "counts", "viewerFollows", "followers", "following", "likedPosts", "collectedPosts"]),
};

/** The payload's target under `field`: its id alone when that answers every field selected of it, else its row. */
function payloadTarget<T extends { id: bigint }>(
  info: GraphQLResolveInfo,
  field: string,
  type: TargetType,
  id: bigint,
  row: () => Promise<T | null>,
): Promise<T> | T {
  // A stand-in the selected resolvers read only the id of.
  if (selectsOnly(info, answeredById[type], [field])) return { id } as T;
  return existing(row(), type, id);
}

async function onPost(ctx: Context, info: GraphQLResolveInfo, rawId: string, relation: Relation, join: boolean) {
  const id = parseId(rawId, "postId");
  const changed = await change(ctx, relation, { type: "post", id }, join);
  return { changed, post: await payloadTarget(info, "post", "post", id, () => ctx.loaders.post.load(id)) };
}

async function onComment(ctx: Context, info: GraphQLResolveInfo, rawId: string, join: boolean) {
  const id = parseId(rawId, "commentId");
  const changed = await change(ctx, "like", { type: "comment", id }, join);
  return { changed, comment: await payloadTarget(info, "comment", "comment", id, () => ctx.loaders.comment.load(id)) };
}

async function onUser(ctx: Context, info: GraphQLResolveInfo, rawId: string, join: boolean) {
  const id = parseId(rawId, "userId");
  const changed = await change(ctx, "follow", { type: "user", id }, join);
  return { changed, user: await payloadTarget(info, "user", "user", id, () => ctx.loaders.user.load(id)) };
}

async function signIn(ctx: Context, session: Promise<Session>): Promise<Session> {
  const signedIn = await session;
  ctx.viewer = { userId: signedIn.user.id };
  return signedIn;
}

export const Mutation = {
  register: (_: unknown, args: { username: string; email: string; password: string }, ctx: Context) =>
    signIn(ctx, ctx.services.users.register(args.username, args.email, args.password)),
  login: (_: unknown, args: { username: string; password: string }, ctx: Context) => signIn(ctx, ctx.services.users.login(args.username, args.password)),
  createPost: (_: unknown, args: { title: string; body: string }, ctx: Context) =>
    ctx.services.content.createPost(requireViewer(ctx).userId, args.title, args.body),
  createComment(_: unknown, args: { postId: string; body: string; parentId?: string | null }, ctx: Context) {
    const viewer = requireViewer(ctx);
    const postId = parseId(args.postId, "postId");
    const parentId = args.parentId ? parseId(args.parentId, "parentId") : null;
    return ctx.services.content.createComment(viewer.userId, postId, args.body, parentId);
  },
  likePost: (_: unknown, args: { postId: string }, ctx: Context, info: GraphQLResolveInfo) => onPost(ctx, info, args.postId, "like", true),
  unlikePost: (_: unknown, args: { postId: string }, ctx: Context, info: GraphQLResolveInfo) => onPost(ctx, info, args.postId, "like", false),
  likeComment: (_: unknown, args: { commentId: string }, ctx: Context, info: GraphQLResolveInfo) => onComment(ctx, info, args.commentId, true),
  unlikeComment: (_: unknown, args: { commentId: string }, ctx: Context, info: GraphQLResolveInfo) => onComment(ctx, info, args.commentId, false),
  collectPost: (_: unknown, args: { postId: string }, ctx: Context, info: GraphQLResolveInfo) => onPost(ctx, info, args.postId, "collect", true),
  uncollectPost: (_: unknown, args: { postId: string }, ctx: Context, info: GraphQLResolveInfo) => onPost(ctx, info, args.postId, "collect", false),
  followUser: (_: unknown, args: { userId: string }, ctx: Context, info: GraphQLResolveInfo) => onUser(ctx, info, args.userId, true),
  unfollowUser: (_: unknown, args: { userId: string }, ctx: Context, info: GraphQLResolveInfo) => onUser(ctx, info, args.userId, false),
  // The view service refuses more than its maximum of ids, which the variables limit keeps small enough to parse first.
  recordViews: (_: unknown, args: { postIds: string[] }, ctx: Context) => ctx.services.views.record(args.postIds.map((id) => parseId(id, "postIds"))),
};
