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
   * Posts and comments Redis holds, least recently used first: the `count` coldest
   * of about `sample` counter hashes found by SCAN from where the previous call stopped.
   */
  coldest(sample: number, count: number): Promise<Target[]>;
}
