// Redis's memory, and the coldest targets it can let go of.
import type { Target } from "../model/index.js";

/** Redis's memory as last measured: of its fullest node on a cluster. */
export interface MemoryReading {
  readonly usedBytes: number;
  /** Its `maxmemory`; 0 when it has no limit. */
  readonly maxBytes: number;
  /** Its `maxmemory-policy`. */
  readonly policy: string;
}

export interface MemoryStore {
  /** Measures Redis's memory now (INFO memory: one command per node). */
  read(): Promise<MemoryReading>;
  /**
   * Posts and comments Redis holds, least recently used first (by their use records):
   * the `count` coldest of about `sample` looked at, from where the previous call stopped.
   */
  coldest(sample: number, count: number): Promise<Target[]>;
  /**
   * Moves targets eviction had to keep (changes not yet persisted, or too big to evict) to
   * the back of the coldest, as if used now: the next rounds look past them instead of at
   * them again.
   */
  passOver(targets: readonly Target[]): Promise<void>;
  /**
   * Deletes the `count` least recently used of about `sample` users' member indexes unused
   * for `idleSeconds` at least; answers how many went. A user's pending record (the likes
   * not yet persisted) is kept, so the index's next load is whole. None where Redis keeps
   * no member indexes (a cluster).
   */
  reclaimIndexes(sample: number, count: number, idleSeconds: number): Promise<number>;
}

/**
 * When each target Redis holds was last used (read, from Redis or from a process's
 * memory, or changed), kept apart from the target itself: a reconcile pass reads every
 * counter hash, and Redis 7.0 has no way to read one without counting it as used.
 */
export interface UseRecords {
  /** Records now as the last use of these targets; one Redis does not hold keeps no record. */
  touch(targets: readonly Target[]): Promise<void>;
}
