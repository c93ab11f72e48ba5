// Counts of targets: read from Redis, and put back into Redis from PostgreSQL
// when Redis does not hold a target (new Redis, flushed, or never warmed).
import { LRUCache } from "lru-cache";
import type { CounterHash } from "../stores/redis/counter-hash.js";
import type { CounterStore } from "../stores/redis/counter-store.js";
import type { PersistedCounterStore } from "../stores/postgres/persisted-counter-store.js";
import { counterNames, targetKey, type Target, type TargetKey } from "./targets.js";

/** What PostgreSQL knows of a target: whether it exists and who wrote it. */
export type TargetLookup = (target: Target) => Promise<{ authorId: bigint | null } | null>;

export interface CounterService {
  /** Counter hashes of existing targets, in order; one Redis round trip when all are cached. */
  read(targets: readonly Target[]): Promise<CounterHash[]>;
  /** Puts a target's counters into Redis from PostgreSQL; false when the target does not exist. */
  warm(target: Target): Promise<boolean>;
  /**
   * Adds to a counter whose truth is Redis: a target Redis does not hold is
   * warmed from PostgreSQL first, so the change is not lost.
   */
  bump(target: Target, name: string, delta: number): Promise<void>;
  /**
   * Mirrors into Redis a change PostgreSQL already holds (written in the same
   * transaction as its cause). A target Redis does not hold is left alone: warming it
   * later reads the new value from PostgreSQL.
   */
  mirror(target: Target, name: string, delta: number): Promise<void>;
  /** Marks a just-created target known to Redis with all its counters at zero. */
  initNew(target: Target, authorId?: bigint): Promise<void>;
}

export interface CounterServiceOptions {
  readonly counterStore: CounterStore;
  readonly persistedCounters: PersistedCounterStore;
  readonly lookup: TargetLookup;
  /** How long an id found missing in PostgreSQL is answered as missing without asking again. */
  readonly missingTtlMs?: number;
}

const zeroCounts = (target: Target) => Object.fromEntries(counterNames[target.type].map((n) => [n, 0]));

export function createCounterService(options: CounterServiceOptions): CounterService {
  const { counterStore, persistedCounters, lookup } = options;
  const missing = new LRUCache<TargetKey, true>({ max: 100_000, ttl: options.missingTtlMs ?? 30_000 });
  const warming = new Map<TargetKey, Promise<boolean>>();

  async function load(target: Target): Promise<boolean> {
    const key = targetKey(target);
    if (missing.has(key)) return false;
    const found = await lookup(target);
    if (!found) {
      missing.set(key, true);
      return false;
    }
    const [persisted = {}] = await persistedCounters.read([target]);
    await counterStore.init(target, { ...zeroCounts(target), ...persisted }, found.authorId ?? undefined);
    return true;
  }

  const warm = (target: Target): Promise<boolean> => {
    const key = targetKey(target);
    // Concurrent requests for one target share one warm-up.
    let pending = warming.get(key);
    if (!pending) {
      pending = load(target).finally(() => warming.delete(key));
      warming.set(key, pending);
    }
    return pending;
  };

  return {
    warm,
    async read(targets) {
      const cached = await counterStore.read(targets);
      const misses = targets.filter((_, i) => cached[i] === null);
      if (misses.length === 0) return cached as CounterHash[];
      await Promise.all(misses.map(warm));
      const reread = await counterStore.read(misses);
      let next = 0;
      return cached.map((hash, i) => hash ?? reread[next++] ?? { counts: zeroCounts(targets[i] as Target), generation: 0, authorId: null });
    },
    async bump(target, name, delta) {
      if (await counterStore.bump(target, name, delta)) return;
      if ((await warm(target)) && !(await counterStore.bump(target, name, delta))) {
        throw new Error(`Counters of ${target.type} ${target.id} left Redis right after being loaded.`);
      }
    },
    async mirror(target, name, delta) {
      await counterStore.bump(target, name, delta);
    },
    async initNew(target, authorId) {
      missing.delete(targetKey(target));
      await counterStore.init(target, { [counterNames[target.type][0]]: 0 }, authorId);
    },
  };
}
