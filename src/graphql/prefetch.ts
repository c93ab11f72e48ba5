import type { GraphQLResolveInfo } from "graphql";
import type { TargetType } from "../domain/model.js";
import type { Context } from "./context.js";
import { selects } from "./look-ahead.js";

/** The fields of each type that its view (counts and the viewer's memberships) answers. */
const viewFields: Record<TargetType, readonly string[]> = {
  post: ["counts", "viewerHasLiked", "viewerHasCollected"],
  comment: ["counts", "viewerHasLiked"],
  user: ["counts", "viewerFollows"],
};

/**
 * Before a list of posts, comments or users is returned: when its items select
 * their counts or the viewer's memberships, load them for the whole list in one
 * round trip, so each item answers synchronously. Lists of one connection level
 * (each post's page of comments) arrive in the same tick and share that round trip.
 */
export async function prefetchCounts(
  ctx: Context,
  info: GraphQLResolveInfo,
  type: TargetType,
  ids: readonly bigint[],
  itemPath: readonly string[] = [],
): Promise<void> {
  if (ids.length === 0) return;
  if (viewFields[type].some((field) => selects(info, [...itemPath, field]))) {
    await ctx.loaders.views.prefetch(ids.map((id) => ({ type, id })));
  }
}
