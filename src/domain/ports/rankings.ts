// The hot ranking as Redis keeps it, and what PostgreSQL holds to mirror or rebuild it.
import type { HotWindow, RankedLikes } from "../model/index.js";

/** The hot ranking as Redis keeps it: time buckets and windows of posts by likes (src/domain/rankings.ts). */
export interface RankingStore {
  /** The window's best post ids, best first (ties: newest post first), at most `limit`: one command. */
  top(window: HotWindow, limit: number): Promise<bigint[]>;
  /**
   * Sets bucket counts (those still in their window at `nowMs`) and like counts as
   * PostgreSQL committed them, each only where Redis holds an older write of its
   * row. Safe to repeat, in any order; keeps each ranking within its capacity.
   */
  mirror(ranked: RankedLikes, nowMs: number): Promise<void>;
  /** Sums each window's buckets at `nowMs`; "missing" when Redis lost the ranking (rebuild it first). */
  refresh(nowMs: number): Promise<"refreshed" | "missing">;
  /** Marks the ranking rebuilt from PostgreSQL, so refreshes run. */
  markRebuilt(): Promise<void>;
}

/** The hot ranking's truth in PostgreSQL. */
export interface RankingSource {
  /**
   * The `limit` best posts of each bucket still in its window at `nowMs`, and of like
   * counts, with their seqs; and as many of those last written down to 0 (or below).
   */
  best(nowMs: number, limit: number): Promise<RankedLikes>;
  /** Deletes at most `limit` bucket rows that started before `before`; answers how many it deleted. */
  prune(before: Date, limit: number): Promise<number>;
}
