// Automatic persisted queries in Redis, so that a hash registered through one API
// process is found by every other, and after a restart: a client that opens a new
// connection for each request (mobile clients behind carrier NATs and load
// balancers) lands on any process. Each process keeps the texts it has seen in
// memory too: a hash names its text for good, so a copy is never stale, and a
// feed's lookup costs no Redis round trip once a process has seen it.
//
// Redis runs with maxmemory-policy noeviction, so what is kept is bounded here: each
// text expires `ttlSeconds` after its last use (a registration, a read from Redis, or
// an answer from a process's memory, which it tells Redis of a few times a TTL), at
// most `maxEntries` are kept (10% more between two trims; the least recently used
// leave first), and a text longer than `maxQueryBytes` is not kept (it still runs;
// its client sends it again next time). Every key shares the hash tag {pq}: on a
// cluster they sit on one node, which each process reads only for texts it has not seen.
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

/** What a lookup that Redis did not answer in time is reported as. */
class PersistedQueryLookupTimeout extends Error {
  override readonly name = "PersistedQueryLookupTimeout";
}

/** Rejects after `ms` unless `cancel` is called first; the timer does not hold the process open. */
function deadline(ms: number): { readonly expired: Promise<never>; cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new PersistedQueryLookupTimeout(`Redis did not answer a persisted query lookup within ${ms} ms`)), ms).unref();
  });
  return { expired, cancel: () => clearTimeout(timer) };
}

/** A text a process holds, and when it last told Redis of its use (ms, monotonic). */
interface Seen {
  readonly query: string;
  touchedAt: number;
}

/** How far past its bound the index may grow before it is trimmed back: one trim per many registrations, not one each. */
const trimSlack = 1.1;

export function createPersistedQueryStore(redis: RedisClient, keys: RedisKeys, options: PersistedQueryStoreOptions): PersistedQueryStore {
  const maxQueryBytes = options.maxQueryBytes ?? 16_384;
  const lookupTimeoutMs = options.lookupTimeoutMs ?? 200;
  // A text in use is told to Redis a few times a TTL, so that it neither expires nor leaves first.
  const touchEveryMs = (options.ttlSeconds * 1000) / 4;
  const index = keys.persistedQueryIndex();
  // Scores in ms, kept apart within a millisecond, so that the least recently used leave first even then.
  let lastScore = 0;
  const score = () => (lastScore = Math.max(Date.now(), lastScore + 1));
  const seen = new LRUCache<string, Seen>({ maxSize: options.memoryBytes ?? 8 * 1024 * 1024, sizeCalculation: ({ query }) => query.length + 64 });

  /** Reads a text and keeps it another TTL, as a use: what clients still send stays. */
  async function read(hash: string): Promise<string | undefined> {
    const query = await redis.getex(keys.persistedQuery(hash), "EX", options.ttlSeconds);
    if (query === null) return undefined;
    // Added back if a trim took it out meanwhile: what is kept is always counted.
    await redis.zadd(index, score(), hash);
    return query;
  }

  /** Tells Redis that a text this process answered from memory is in use; a failure waits for the next use. */
  function touch(hash: string, known: Seen): void {
    if (performance.now() - known.touchedAt < touchEveryMs) return;
    known.touchedAt = performance.now();
    redis
      .multi()
      .expire(keys.persistedQuery(hash), options.ttlSeconds)
      .zadd(index, "XX", score(), hash)
      .exec()
      .catch((error: unknown) => options.onFailure?.(error));
  }

  /** Drops hashes whose texts expired, then the least recently used texts past the bound. */
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
      if (known !== undefined) {
        touch(hash, known);
        return known.query;
      }
      const timer = deadline(lookupTimeoutMs);
      try {
        const query = await Promise.race([read(hash), timer.expired]);
        if (query !== undefined) seen.set(hash, { query, touchedAt: performance.now() });
        return query;
      } catch (error) {
        options.onFailure?.(error);
        return undefined;
      } finally {
        timer.cancel();
      }
    },
    async set(hash, query) {
      if (!sha256Hex.test(hash) || Buffer.byteLength(query) > maxQueryBytes) return;
      seen.set(hash, { query, touchedAt: performance.now() });
      try {
        const replies = await redis.multi().set(keys.persistedQuery(hash), query, "EX", options.ttlSeconds).zadd(index, score(), hash).zcard(index).exec();
        if (Number(replies?.[2]?.[1] ?? 0) > options.maxEntries * trimSlack) await trim();
      } catch (error) {
        options.onFailure?.(error);
      }
    },
  };
}
