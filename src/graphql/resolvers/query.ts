import type { HotWindow, Post } from "../../domain/model/index.js";
import { badInput } from "../../errors.js";
import type { GraphQLResolveInfo } from "graphql";
import { parseId, parsePageSize } from "../arguments.js";
import { idConnection } from "../connection.js";
import { decodeCursor } from "../cursors.js";
import { selectsOnly } from "../look-ahead.js";
import { prefetchCounts } from "../prefetch.js";
import type { Context } from "../context.js";

export const maxPostsPerRequest = 100;

/** The fields of a User that its id alone answers. */
const answeredById: ReadonlySet<string> = new Set(["id", "__typename"]);

export const Query = {
  viewer(_: unknown, __: unknown, ctx: Context, info: GraphQLResolveInfo) {
    if (!ctx.viewer) return null;
    // Authentication vouched that the viewer exists, so asking only who they are needs no row.
    if (selectsOnly(info, answeredById)) return { id: ctx.viewer.userId };
    return ctx.loaders.user.load(ctx.viewer.userId);
  },
  user: (_: unknown, args: { id: string }, ctx: Context) => ctx.loaders.user.load(parseId(args.id, "id")),
  post: (_: unknown, args: { id: string }, ctx: Context) => ctx.loaders.post.load(parseId(args.id, "id")),
  comment: (_: unknown, args: { id: string }, ctx: Context) => ctx.loaders.comment.load(parseId(args.id, "id")),
  async posts(_: unknown, args: { ids: string[] }, ctx: Context, info: GraphQLResolveInfo) {
    if (args.ids.length > maxPostsPerRequest) {
      throw badInput("ids", `posts takes at most ${maxPostsPerRequest} ids; got ${args.ids.length}. Split the request.`);
    }
    // One batch for the whole list, straight from the catalog: a loader would make a promise per id.
    const rows = await ctx.services.catalog.posts(args.ids.map((id) => parseId(id, "ids")));
    const found = rows.flatMap((row) => (row ? [row.id] : []));
    await prefetchCounts(ctx, info, "post", found);
    return rows;
  },
  async feed(_: unknown, args: { first: number; after?: string | null }, ctx: Context, info: GraphQLResolveInfo) {
    const first = parsePageSize(args.first);
    const before = args.after ? decodeCursor(args.after) : null;
    const page = await ctx.services.content.feed(first, before);
    await prefetchCounts(
      ctx,
      info,
      "post",
      page.items.map((p) => p.id),
      ["edges", "node"],
    );
    return idConnection(page);
  },
  async hotPosts(_: unknown, args: { first: number; window: HotWindow }, ctx: Context, info: GraphQLResolveInfo) {
    const ids = await ctx.services.rankings.hotPosts(args.window, args.first);
    // A post is ranked only once PostgreSQL holds its likes, so its row exists.
    const posts = (await ctx.services.catalog.posts(ids)).filter((p): p is Post => p !== null);
    await prefetchCounts(
      ctx,
      info,
      "post",
      posts.map((p) => p.id),
    );
    return posts;
  },
};
