// Users, posts and comments by id. Their rows never change once written (the
// contract has no edit or delete), so a process-wide cache serves repeats
// without SQL; only ids never seen before reach PostgreSQL, one query per batch.
import { LRUCache } from "lru-cache";
import type { TargetLookup } from "./counters.js";
import type { Comment, Post, User } from "./model.js";
import type { CommentStore, PostStore, UserStore } from "./ports.js";

interface Identified {
  readonly id: bigint;
}

export type BatchReader<T> = (ids: readonly bigint[]) => Promise<(T | null)[]>;

export function cachedReader<T extends Identified>(fetch: (ids: readonly bigint[]) => Promise<T[]>, max: number): BatchReader<T> {
  const cache = new LRUCache<bigint, T>({ max });
  return async (ids) => {
    const rows = ids.map((id) => cache.get(id) ?? null);
    const unknown = [...new Set(ids.filter((_, i) => rows[i] === null))];
    if (unknown.length === 0) return rows;
    const found = new Map((await fetch(unknown)).map((row) => [row.id, row]));
    for (const [id, row] of found) cache.set(id, row);
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

/** Whether a target exists in PostgreSQL, and who wrote it: what a rebuild needs to know. */
export function lookupTarget(catalog: Catalog): TargetLookup {
  return async (target) => {
    switch (target.type) {
      case "post":
        return findOne(catalog.posts, target.id);
      case "comment":
        return findOne(catalog.comments, target.id);
      case "user":
        return (await findOne(catalog.users, target.id)) ? { authorId: null } : null;
    }
  };
}
