// Users, posts and comments by id. Their rows never change once written (the
// contract has no edit or delete), so a process-wide cache serves repeats
// without SQL; only ids never seen before reach PostgreSQL, one query per batch.
import { LRUCache } from "lru-cache";
import type { CommentRecord, PostRecord, UserRecord } from "../stores/postgres/records.js";

interface Identified {
  readonly id: bigint;
}

export type BatchReader<T> = (ids: readonly bigint[]) => Promise<(T | null)[]>;

export function cachedReader<T extends Identified>(fetch: (ids: readonly bigint[]) => Promise<T[]>, max: number): BatchReader<T> {
  const cache = new LRUCache<bigint, T>({ max });
  return async (ids) => {
    const unknown = [...new Set(ids.filter((id) => !cache.has(id)))];
    if (unknown.length > 0) for (const row of await fetch(unknown)) cache.set(row.id, row);
    return ids.map((id) => cache.get(id) ?? null);
  };
}

export interface Catalog {
  readonly users: BatchReader<UserRecord>;
  readonly posts: BatchReader<PostRecord>;
  readonly comments: BatchReader<CommentRecord>;
}

export function createCatalog(
  stores: {
    users: { findByIds(ids: readonly bigint[]): Promise<UserRecord[]> };
    posts: { findByIds(ids: readonly bigint[]): Promise<PostRecord[]> };
    comments: { findByIds(ids: readonly bigint[]): Promise<CommentRecord[]> };
  },
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
