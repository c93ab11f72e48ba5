// Automatic persisted queries in Redis, so that a hash registered through one API
// process is found by every other, and after a restart: a client that opens a new
// connection for each request (mobile clients behind carrier NATs and load
// balancers) lands on any process. Each process keeps the texts it has seen in
// memory too: a hash names its text for good, so a copy is never stale, and a
// feed's lookup costs no Redis round trip once a process has seen it.
//
// Redis runs with maxmemory-policy noeviction, so what is kept is bounded here: each
// text expires `ttlSeconds` after its last registration or read from Redis, at most
// `maxEntries` are kept (the least recently used leave first), and a text longer than
// `maxQueryBytes` is not kept (it still runs; its client sends it again next time).
import { LRUCache } from "lru-cache";
import type { PersistedQueryStore } from "../../domain/ports/index.js";
import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";

export interface PersistedQueryStoreOptions {
  /** How long a text is kept in Redis after its last registration or read there. */
  readonly ttlSeconds: number;
  /** How many texts Redis keeps at most. */
  readonly maxEntries: number;
  /** Longer texts are not kept; default 16 KiB. */
  readonly maxQueryBytes?: number;
  /** How long a lookup waits for Redis before the client is told to send the text; default 200 ms. */
  readonly lookupTimeoutMs?: number;
  /** Texts one process keeps in memory, by their total length; default 8 MiB. */
  readonly memoryBytes?: number;
  /** Told when Redis could not be read or written: the request goes on as if the hash were unknown. */
  readonly onFailure?: (error: unknown) => void;
}

const sha256Hex = /^[0-9a-f]{64}$/;

/** Resolves to `undefined` after `ms`; the timer does not hold the process open. */
function timeout(ms: number): Promise<undefined> {
  return new Promise((resolve) => setTimeout(() => resolve(undefined), ms).unref());
}

export function createPersistedQueryStore(redis: RedisClient, keys: RedisKeys, options: PersistedQueryStoreOptions): PersistedQueryStore {
  const maxQueryBytes = options.maxQueryBytes ?? 16_384;
  const lookupTimeoutMs = options.lookupTimeoutMs ?? 200;
  const index = keys.persistedQueryIndex();
  // Scores in ms, kept apart within a millisecond, so that the least recently used leave first even then.
  let lastScore = 0;
  const score = () => (lastScore = Math.max(Date.now(), lastScore + 1));
  const seen = new LRUCache<string, string>({ maxSize: options.memoryBytes ?? 8 * 1024 * 1024, sizeCalculation: (query) => query.length + 64 });

  /** Reads a text and keeps it another TTL, as a use: what clients still send stays. */
  async function read(hash: string): Promise<string | undefined> {
    const replies = await redis.multi().getex(keys.persistedQuery(hash), "EX", options.ttlSeconds).zadd(index, "XX", score(), hash).exec();
    const [error, query] = replies?.[0] ?? [null, null];
    if (error) throw error;
    return typeof query === "string" ? query : undefined;
  }

  /** Drops the least recently used texts past the bound, and hashes whose texts expired. */
  async function trim(): Promise<void> {
    await redis.zremrangebyscore(index, "-inf", Date.now() - options.ttlSeconds * 1000);
    const over = (await redis.zcard(index)) - options.maxEntries;
    if (over <= 0) return;
    const dropped = await redis.zpopmin(index, over);
    // ZPOPMIN answers member, score, member, score, …
    const hashes = dropped.filter((_, i) => i % 2 === 0);
    if (hashes.length > 0) await redis.del(...hashes.map((hash) => keys.persistedQuery(hash)));
  }

  return {
    async get(hash) {
      if (!sha256Hex.test(hash)) return undefined;
      const known = seen.get(hash);
      if (known !== undefined) return known;
      try {
        const query = await Promise.race([read(hash), timeout(lookupTimeoutMs)]);
        if (query !== undefined) seen.set(hash, query);
        return query;
      } catch (error) {
        options.onFailure?.(error);
        return undefined;
      }
    },
    async set(hash, query) {
      if (!sha256Hex.test(hash) || Buffer.byteLength(query) > maxQueryBytes) return;
      seen.set(hash, query);
      try {
        const replies = await redis.multi().set(keys.persistedQuery(hash), query, "EX", options.ttlSeconds).zadd(index, score(), hash).zcard(index).exec();
        if (Number(replies?.[2]?.[1] ?? 0) > options.maxEntries) await trim();
      } catch (error) {
        options.onFailure?.(error);
      }
    },
  };
}
