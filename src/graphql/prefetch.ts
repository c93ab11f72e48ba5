import type { GraphQLResolveInfo } from "graphql";
import type { Context } from "./context.js";
import { selects } from "./look-ahead.js";

/**
 * Before a list of posts or comments is returned: when its items select
 * `counts` or `viewerHasLiked`, load both for the whole list in one round trip,
 * so each item answers synchronously. Lists of one connection level (each
 * post's page of comments) arrive in the same tick and share that round trip.
 */
export async function prefetchCounts(
  ctx: Context,
  info: GraphQLResolveInfo,
  type: "post" | "comment",
  ids: readonly bigint[],
  itemPath: readonly string[] = [],
): Promise<void> {
  if (ids.length === 0) return;
  if (selects(info, [...itemPath, "counts"]) || selects(info, [...itemPath, "viewerHasLiked"])) {
    await ctx.loaders.views.prefetch(ids.map((id) => ({ type, id })));
  }
}
