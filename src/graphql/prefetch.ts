import type { GraphQLResolveInfo } from "graphql";
import type { Relation, TargetType } from "../domain/model/index.js";
import type { Context } from "./context.js";
import { selects } from "./look-ahead.js";

/** The fields of each type that its view answers: its counts, and the viewer's membership of each relation. */
const viewFields: Record<TargetType, { readonly counts: string; readonly memberships: Readonly<Partial<Record<Relation, string>>> }> = {
  post: { counts: "counts", memberships: { like: "viewerHasLiked", collect: "viewerHasCollected" } },
  comment: { counts: "counts", memberships: { like: "viewerHasLiked" } },
  user: { counts: "counts", memberships: { follow: "viewerFollows" } },
};

/**
 * Before a list of posts, comments or users is returned: when its items select
 * their counts or the viewer's memberships, load them for the whole list in one
 * round trip, so each item answers synchronously; only the memberships selected
 * are looked up (a feed without viewerHasCollected asks nothing of collectors).
 * Lists of one connection level (each post's page of comments) arrive in the same
 * tick and share that round trip.
 */
export async function prefetchCounts(
  ctx: Context,
  info: GraphQLResolveInfo,
  type: TargetType,
  ids: readonly bigint[],
  itemPath: readonly string[] = [],
): Promise<void> {
  if (ids.length === 0) return;
  const fields = viewFields[type];
  const relations = (Object.entries(fields.memberships) as [Relation, string][])
    .filter(([, field]) => selects(info, [...itemPath, field]))
    .map(([relation]) => relation);
  if (relations.length > 0 || selects(info, [...itemPath, fields.counts])) {
    await ctx.loaders.readouts.prefetch(
      ids.map((id) => ({ type, id })),
      relations,
    );
  }
}
