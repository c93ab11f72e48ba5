// Users, posts and comments by id. Their rows never change once written (the
// contract has no edit or delete), so a process-wide cache serves repeats
// without SQL; only ids never seen before reach PostgreSQL, one query per batch.
import type { TargetLookup } from "./target-loads.js";
import { targetKey, type Comment, type Post, type Target, type User } from "./model/index.js";
import type { CommentStore, PostStore, UserStore } from "./ports/index.js";

interface Identified {
  readonly id: bigint;
}

export type BatchReader<T> = (ids: readonly bigint[]) => Promise<(T | null)[]>;

/** Ids up to this are exact as numbers; rows of larger ids are fetched each time. */
const largestNumberId = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * Rows by id, fetched once. A feed looks up 100 rows a request: keyed by bigint in
 * an lru-cache, lookups were about 5% of a feed's API CPU; keyed by number in a
 * plain Map, the oldest fetched going first when full, they cost a fraction.
 * Rows never change, so an evicted row is only fetched again.
 */
export function cachedReader<T extends Identified>(fetch: (ids: readonly bigint[]) => Promise<T[]>, max: number): BatchReader<T> {
  const cache = new Map<number, T>();
  const cached = (id: bigint) => (id <= largestNumberId ? cache.get(Number(id)) : undefined);
  return async (ids) => {
    const rows = ids.map((id) => cached(id) ?? null);
    const unknown = [...new Set(ids.filter((_, i) => rows[i] === null))];
    if (unknown.length === 0) return rows;
    const found = new Map((await fetch(unknown)).map((row) => [row.id, row]));
    for (const [id, row] of found) {
      if (id > largestNumberId) continue;
      if (cache.size >= max) {
        const oldest = cache.keys().next();
        if (!oldest.done) cache.delete(oldest.value);
      }
      cache.set(Number(id), row);
    }
    return ids.map((id, i) => rows[i] ?? found.get(id) ?? null);
  };
}

export interface Catalog {
  readonly users: BatchReader<User>;
  readonly posts: BatchReader<Post>;
  readonly comments: BatchReader<Comment>;
}

export function createCatalog(
  stores: { readonly users: Pick<UserStore, "findByIds">; readonly posts: Pick<PostStore, "findByIds">; readonly comments: Pick<CommentStore, "findByIds"> },
  cacheSize = 100_000,
): Catalog {
  return {
    users: cachedReader((ids) => stores.users.findByIds(ids), cacheSize),
    posts: cachedReader((ids) => stores.posts.findByIds(ids), cacheSize),
    comments: cachedReader((ids) => stores.comments.findByIds(ids), cacheSize),
  };
}

export async function findOne<T>(read: BatchReader<T>, id: bigint): Promise<T | null> {
  const [row] = await read([id]);
  return row ?? null;
}

/** Whether targets exist in PostgreSQL, and who wrote them: what a load needs to know. One batch per type. */
export function lookupTarget(catalog: Catalog): TargetLookup {
  return async (targets) => {
    const ofType = (type: Target["type"]) => targets.filter((t) => t.type === type).map((t) => t.id);
    const [posts, comments, users] = await Promise.all([catalog.posts(ofType("post")), catalog.comments(ofType("comment")), catalog.users(ofType("user"))]);
    const found = new Map<string, { authorId: bigint | null }>();
    for (const row of posts) if (row) found.set(targetKey({ type: "post", id: row.id }), { authorId: row.authorId });
    for (const row of comments) if (row) found.set(targetKey({ type: "comment", id: row.id }), { authorId: row.authorId });
    for (const row of users) if (row) found.set(targetKey({ type: "user", id: row.id }), { authorId: null });
    return targets.map((t) => found.get(targetKey(t)) ?? null);
  };
}
