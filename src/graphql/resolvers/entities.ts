// Apollo Federation's `_entities`: how a supergraph's router asks this subgraph for
// the posts, comments and users another subgraph named, by their @key (the id).
// Written here rather than left to @apollo/subgraph's default, which resolves each
// representation on its own: this one reads the rows of each type in one batch and
// then the counts and the viewer's memberships of all of them in one round trip, as
// `posts(ids:)` does, and bounds the list as `posts(ids:)` does.
import type { GraphQLResolveInfo } from "graphql";
import type { TargetType } from "../../domain/model/index.js";
import { badInput } from "../../errors.js";
import { parseId } from "../arguments.js";
import type { Context } from "../context.js";
import { prefetchCounts } from "../prefetch.js";
import { maxPostsPerRequest } from "./query.js";

/** The entity types of the schema (those with @key), and the target type each is. */
const entityTypes: Readonly<Record<string, TargetType>> = { Post: "post", Comment: "comment", User: "user" };

/** A representation as the router sends it: the type's name and its key fields. */
type Representation = { readonly __typename?: unknown; readonly id?: unknown };

function parseRepresentation(representation: unknown): { type: TargetType; typename: string; id: bigint } {
  const { __typename: typename, id } = (typeof representation === "object" && representation !== null ? representation : {}) as Representation;
  const type = typeof typename === "string" && Object.hasOwn(entityTypes, typename) ? entityTypes[typename] : undefined;
  if (!type || typeof typename !== "string") {
    throw badInput("representations", `Each representation names an entity type of this subgraph (${Object.keys(entityTypes).join(", ")}) in __typename.`);
  }
  if (typeof id !== "string") throw badInput("representations", `A ${typename} representation carries its key: a string id.`);
  return { type, typename, id: parseId(id, "representations") };
}

/** The rows of one target type by id, in order, null for an unknown id: one batch. */
function rowsOf(type: TargetType, ids: readonly bigint[], ctx: Context): Promise<readonly (object | null)[]> {
  if (ids.length === 0) return Promise.resolve([]);
  switch (type) {
    case "post":
      return ctx.services.catalog.posts(ids);
    case "comment":
      return ctx.services.catalog.comments(ids);
    case "user":
      return ctx.services.catalog.users(ids);
  }
}

/**
 * The entities in the order of `representations`, null for an id this subgraph does
 * not know. Each is a copy of its row with its `__typename`, which the `_Entity`
 * union resolves by: rows are shared by the catalog's cache and are not written.
 */
export async function resolveEntities(_: unknown, args: { representations: readonly unknown[] }, ctx: Context, info: GraphQLResolveInfo) {
  const { representations } = args;
  if (representations.length > maxPostsPerRequest) {
    throw badInput("representations", `_entities takes at most ${maxPostsPerRequest} representations; got ${representations.length}. Split the request.`);
  }
  const parsed = representations.map(parseRepresentation);
  const types = [...new Set(parsed.map((p) => p.type))];
  const loaded = await Promise.all(
    types.map(async (type) => {
      const ids = parsed.filter((p) => p.type === type).map((p) => p.id);
      const rows = await rowsOf(type, ids, ctx);
      return { type, rows: new Map(ids.map((id, i) => [id, rows[i] ?? null])) };
    }),
  );
  const byType = new Map(loaded.map(({ type, rows }) => [type, rows]));
  await Promise.all(
    loaded.map(({ type, rows }) =>
      prefetchCounts(
        ctx,
        info,
        type,
        [...rows].flatMap(([id, row]) => (row ? [id] : [])),
      ),
    ),
  );
  return parsed.map(({ type, typename, id }) => {
    const row = byType.get(type)?.get(id);
    return row ? { ...row, __typename: typename } : null;
  });
}
