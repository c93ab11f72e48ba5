// Keeps the hot ranking's windows summed: after each persisted batch that moved
// likes (at most once per `minGapMs`), every `intervalMs` so windows roll forward
// without likes, and prunes PostgreSQL's old bucket rows every `pruneEveryMs`.
// One refresh runs at a time per process; several workers running it is harmless.
import type { Logger } from "pino";
import type { RankingRefresher } from "../domain/rankings.js";

export interface RankingRefreshOptions {
  readonly refresher: RankingRefresher;
  readonly logger: Logger;
  /** A refresh at least this often, in ms, likes or not. */
  readonly intervalMs: number;
  /** At most one refresh per this many ms after batches. */
  readonly minGapMs: number;
  /** Pruning of old bucket rows this often, in ms (the first right at start). */
  readonly pruneEveryMs?: number;
}

export interface RankingRefresh {
  /** A batch moved likes: refresh soon. */
  nudge(): void;
  /** Stops the timers and waits for a refresh under way. */
  close(): Promise<void>;
}

export function startRankingRefresh(options: RankingRefreshOptions): RankingRefresh {
  const { refresher, logger, intervalMs, minGapMs, pruneEveryMs = 3_600_000 } = options;
  let running: Promise<void> | null = null;
  let again = false;
  let lastStartMs = 0;
  let delayed: NodeJS.Timeout | null = null;
  let closed = false;

  const run = () => {
    lastStartMs = Date.now();
    running = refresher
      .refresh()
      .then(
        (outcome) => void (outcome === "rebuilt" && logger.info("the hot ranking was rebuilt from PostgreSQL")),
        (err: unknown) => logger.warn({ err }, "the hot ranking could not be refreshed; the next refresh tries again"),
      )
      .finally(() => {
        running = null;
        if (again && !closed) {
          again = false;
          nudge();
        }
      });
  };
  function nudge(): void {
    if (closed || delayed) return;
    if (running) {
      again = true;
      return;
    }
    const waitMs = lastStartMs + minGapMs - Date.now();
    if (waitMs <= 0) run();
    else {
      delayed = setTimeout(() => {
        delayed = null;
        nudge();
      }, waitMs);
    }
  }

  let pruning: Promise<void> | null = null;
  const prune = () => {
    if (pruning || closed) return;
    pruning = refresher
      .prune()
      .then(
        (deleted) => void (deleted > 0 && logger.info({ deleted }, "old like buckets pruned")),
        (err: unknown) => logger.warn({ err }, "old like buckets could not be pruned; the next round tries again"),
      )
      .finally(() => (pruning = null));
  };

  const interval = setInterval(nudge, intervalMs);
  const pruneInterval = setInterval(prune, pruneEveryMs);
  nudge();
  prune();
  return {
    nudge,
    async close() {
      closed = true;
      clearInterval(interval);
      clearInterval(pruneInterval);
      if (delayed) clearTimeout(delayed);
      await Promise.all([running, pruning]);
    },
  };
}
