// The hot ranking: which posts gained the most likes in the last hour, day or
// week, and which have the most likes (ALL).
//
// Where it comes from. No Redis key takes a write per like: a single ranking key
// would put every like in the system on one cluster node. The like script stays
// as it was (one slot, the post's). The ranking is instead updated in batches from
// what PostgreSQL committed: the persist batch already knows which like rows it
// really inserted and deleted and their created_at, so it moves per-bucket counts
// in PostgreSQL (like_buckets) in the same transaction, and after the commit
// mirrors the touched rows into Redis as absolute values with their sequence
// numbers (one script call per bucket per batch, far below a key's capacity).
// A worker then sums each window's buckets (refresh), right after a batch
// (at most every RANKING_REFRESH_GAP_MS) and every RANKING_REFRESH_MS, so windows
// roll forward without likes. The ranking is thus about a persist batch behind
// the likes (the pipeline's lag, about a second).
//
// Rebuild. Redis can lose the ranking (a flush, a new server); a marker written
// by the last rebuild tells. The refresher then rebuilds it from PostgreSQL under
// a lease: each live bucket's best posts and the most liked posts, with their
// sequence numbers, so a mirror racing the rebuild keeps whichever write is newer.
import { badInput } from "../errors.js";
import { bucketRetentionMs, hotPostsLimit, rankingCapacity, type HotWindow } from "./model/index.js";
import type { Lease, RankingSource, RankingStore } from "./ports/index.js";

export interface RankingService {
  /** Ids of the window's best posts, best first (ties: newest post first), at most `first` (1–100). */
  hotPosts(window: HotWindow, first: number): Promise<bigint[]>;
}

export interface RankingServiceDeps {
  readonly store: Pick<RankingStore, "top">;
  /**
   * How long a process may answer a window's ids from memory (0: every call asks
   * Redis). Counts are not cached: posts' counts are read live per request.
   */
  readonly cacheMs: number;
  readonly now?: () => number;
}

const windows: readonly HotWindow[] = ["HOUR", "DAY", "WEEK", "ALL"];

export function createRankingService({ store, cacheMs, now = Date.now }: RankingServiceDeps): RankingService {
  // Per window, the best `hotPostsLimit` ids and when they were asked for: one read serves every call within cacheMs.
  const held = new Map<HotWindow, { readonly atMs: number; readonly ids: Promise<bigint[]> }>();
  return {
    async hotPosts(window, first) {
      if (!Number.isInteger(first) || first < 1 || first > hotPostsLimit) {
        throw badInput("first", `first must be an integer from 1 to ${hotPostsLimit}; got ${first}.`);
      }
      // GraphQL admits an explicit null for the window.
      if (!windows.includes(window)) throw badInput("window", `window must be one of ${windows.join(", ")}; got ${String(window)}.`);
      if (cacheMs <= 0) return store.top(window, first);
      const t = now();
      let entry = held.get(window);
      if (!entry || t - entry.atMs >= cacheMs) {
        entry = { atMs: t, ids: store.top(window, hotPostsLimit) };
        held.set(window, entry);
        // A failed read is not kept: the next call asks again.
        const failed = entry;
        failed.ids.catch(() => held.get(window) === failed && held.delete(window));
      }
      return (await entry.ids).slice(0, first);
    },
  };
}

export interface RankingRefresher {
  /**
   * Sums each window's current buckets; when Redis lost the ranking, rebuilds it
   * from PostgreSQL first ("busy": another process is rebuilding it). Safe to run
   * from any number of processes at once.
   */
  refresh(): Promise<"refreshed" | "rebuilt" | "busy">;
  /** Deletes bucket rows no window can need any more, in bounded batches; answers how many. */
  prune(): Promise<number>;
}

export interface RankingRefresherDeps {
  readonly store: Omit<RankingStore, "top">;
  readonly source: RankingSource;
  /** Held by the process rebuilding the ranking. */
  readonly lease: Lease;
  readonly now?: () => number;
  /** How long a rebuild may hold the lease. */
  readonly rebuildLeaseMs?: number;
  /** Rows deleted per statement, and statements per prune at most. */
  readonly pruneBatch?: number;
  readonly pruneBatches?: number;
}

/** Rows are kept a day past the last bucket a late change could still move. */
const pruneMarginMs = 86_400_000;

export function createRankingRefresher(deps: RankingRefresherDeps): RankingRefresher {
  const { store, source, lease, now = Date.now, rebuildLeaseMs = 60_000, pruneBatch = 1_000, pruneBatches = 100 } = deps;
  return {
    async refresh() {
      if ((await store.refresh(now())) === "refreshed") return "refreshed";
      const token = await lease.acquire(rebuildLeaseMs);
      if (token === null) return "busy";
      try {
        const at = now();
        await store.mirror(await source.best(at, rankingCapacity), at);
        await store.markRebuilt();
      } finally {
        await lease.release(token);
      }
      // Only a flush between the two steps could have taken the marker again; the next refresh rebuilds then.
      return (await store.refresh(now())) === "refreshed" ? "rebuilt" : "busy";
    },
    async prune() {
      const before = new Date(now() - bucketRetentionMs - pruneMarginMs);
      let deleted = 0;
      for (let i = 0; i < pruneBatches; i++) {
        const n = await source.prune(before, pruneBatch);
        deleted += n;
        if (n < pruneBatch) break;
      }
      return deleted;
    },
  };
}
