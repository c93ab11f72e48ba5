import type { Target } from "../../domain/targets.js";
import { batchRead, type RedisClient } from "./client.js";
import { parseCounterHash, type CounterHash } from "./counter-hash.js";
import { authorField, type RedisKeys } from "./keys.js";

export interface CounterStore {
  /** Each target's counter hash in the order given, or null where Redis does not hold it. One round trip. */
  read(targets: readonly Target[]): Promise<(CounterHash | null)[]>;
  /** Creates the hash with these values unless it exists; true when created. */
  init(target: Target, counts: Readonly<Record<string, number>>, authorId?: bigint): Promise<boolean>;
  /** Adds `delta` to a counter of a hash Redis holds; false when it does not hold it. */
  bump(target: Target, name: string, delta: number): Promise<boolean>;
}

export function createCounterStore(redis: RedisClient, keys: RedisKeys): CounterStore {
  return {
    async read(targets) {
      const hashes = await batchRead(redis, "hgetall", targets.map((t) => [keys.counters(t)] as const));
      return hashes.map((hash) => (Object.keys(hash).length === 0 ? null : parseCounterHash(hash)));
    },
    async init(target, counts, authorId) {
      const fields: (string | number)[] = Object.entries(counts).flat();
      if (authorId !== undefined) fields.push(authorField, authorId.toString());
      return (await redis.initCounters(keys.counters(target), ...fields)) === 1;
    },
    async bump(target, name, delta) {
      return (await redis.bumpCounter(keys.counters(target), name, delta)) !== -1;
    },
  };
}
