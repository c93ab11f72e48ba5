// Fills Redis back in after reads: the targets a read answered from PostgreSQL
// (Redis did not hold them) are handed here and loaded in the background, a batch
// of many from one snapshot at a time, at a bounded rate per process. Nothing a
// reader does waits for it or is refused because of it, and nothing it is refused
// (a full queue, a failed batch) stops it: what it drops, the next read of the
// target hands in again. A cache whose refusals stop it from warming is the
// textbook metastable failure; this one keeps making progress at its rate.
import { setTimeout as sleep } from "node:timers/promises";
import { targetKey, type Target, type TargetKey } from "./model/index.js";
import type { LoadAdmission, LoadOutcome, TargetLoader } from "./target-loads.js";

export interface Warmer {
  /** Asks for these targets to be loaded; returns at once. Targets waiting already are not queued twice. */
  want(targets: readonly Target[]): void;
  /** Resolves once nothing waits and no batch is under way (tests, shutdown). */
  idle(): Promise<void>;
  /** Targets waiting, and what became of those loaded since start. */
  stats(): WarmerStats;
  /** Stops taking and loading targets; the batch under way finishes. */
  close(): Promise<void>;
}

export interface WarmerStats {
  readonly waiting: number;
  readonly loaded: number;
  /** Handed in while the queue was full, and so left to the next read. */
  readonly dropped: number;
  readonly failedBatches: number;
}

export interface WarmerOptions {
  readonly loader: TargetLoader;
  /** Asked before each batch: Redis's memory policy (memory-policy.ts); a refusal rests the warmer as a failed batch does. */
  readonly admit?: LoadAdmission;
  /** Targets loaded per second at most; default 250. */
  readonly perSecond?: number;
  /** Targets per batch (one PostgreSQL snapshot); default 100. */
  readonly batchSize?: number;
  /** Targets waiting at most; more are dropped until there is room. Default 10,000. */
  readonly maxWaiting?: number;
  /** After a failed or refused batch, how long the warmer rests; default 1 s. */
  readonly restMs?: number;
  /**
   * Whether the next batch should wait, checked every 10 ms until it need not: loads more
   * urgent than the warmer's are under way (a write waits for its target), or Redis is out
   * of reach (a batch could only fail, after costing PostgreSQL its lookups).
   */
  readonly yieldTo?: () => boolean;
  readonly onFailure?: (error: unknown) => void;
}

export function createWarmer(options: WarmerOptions): Warmer {
  const { loader, admit, onFailure } = options;
  const perSecond = Math.max(1, options.perSecond ?? 250);
  const batchSize = Math.max(1, options.batchSize ?? 100);
  const maxWaiting = options.maxWaiting ?? 10_000;
  const restMs = options.restMs ?? 1_000;
  // Insertion-ordered: the oldest wish goes first.
  const waiting = new Map<TargetKey, Target>();
  let running: Promise<void> | null = null;
  let closed = false;
  const stats = { loaded: 0, dropped: 0, failedBatches: 0 };

  async function loadBatch(batch: readonly Target[]): Promise<void> {
    try {
      await admit?.();
      const outcomes: LoadOutcome[] = await loader.load(batch);
      stats.loaded += outcomes.filter((o) => o === "loaded").length;
      // A target dropped again right after its load goes back in line; every other outcome is final.
      batch.forEach((target, i) => {
        if (outcomes[i] === "dropped" && waiting.size < maxWaiting) waiting.set(targetKey(target), target);
      });
    } catch (error) {
      stats.failedBatches++;
      onFailure?.(error);
      await sleep(restMs);
    }
  }

  async function drain(): Promise<void> {
    while (waiting.size > 0 && !closed) {
      const batch: Target[] = [];
      for (const [key, target] of waiting) {
        waiting.delete(key);
        batch.push(target);
        if (batch.length === batchSize) break;
      }
      // A write waiting for its target's load goes first: it answers a user; the warmer answers nobody.
      // Redis out of reach: the batch waits for it rather than failing.
      while (options.yieldTo?.() && !closed) await sleep(10);
      const startedAt = performance.now();
      await loadBatch(batch);
      // Paced by what the batch held: the rate bounds PostgreSQL's work, not the batches' count.
      const dueMs = (batch.length / perSecond) * 1000 - (performance.now() - startedAt);
      if (dueMs > 0) await sleep(dueMs);
    }
  }

  function kick(): void {
    running ??= drain().finally(() => {
      running = null;
      if (waiting.size > 0 && !closed) kick();
    });
  }

  return {
    want(targets) {
      if (closed) return;
      for (const target of targets) {
        if (waiting.size >= maxWaiting) {
          stats.dropped++;
          continue;
        }
        waiting.set(targetKey(target), target);
      }
      if (waiting.size > 0) kick();
    },
    async idle() {
      while (running) await running;
    },
    stats: () => ({ waiting: waiting.size, ...stats }),
    async close() {
      closed = true;
      waiting.clear();
      while (running) await running;
    },
  };
}
