// One reconcile pass: every target Redis holds (by SCAN, in bounded batches) is
// compared with PostgreSQL, Redis authoritative; then every target only
// PostgreSQL holds (keyset pages), PostgreSQL authoritative. Differences become
// compensation messages that the compensation consumer applies. Quiescent cold
// targets leave Redis on the way, to come back by a rebuild when next used.
import { compareCached, compareUncached, type Compensation, type DifferenceKind } from "../domain/reconcile.js";
import type { Target } from "../domain/targets.js";
import type { ReconcileDatabaseStore } from "../stores/postgres/reconcile-store.js";
import type { RebuildStore } from "../stores/redis/rebuild-store.js";
import type { ReconcileCacheStore } from "../stores/redis/reconcile-store.js";

export interface ReconcileSummary {
  readonly targetsChecked: number;
  readonly skippedInFlight: number;
  readonly differences: Record<DifferenceKind, number>;
  readonly repairsSent: number;
  readonly evicted: number;
  readonly seconds: number;
}

export interface ReconcileProgress {
  readonly phase: "redis" | "postgres";
  /** Targets done in this phase, and an estimate of the phase's total. */
  readonly done: number;
  readonly total: number;
}

export interface ReconcileOptions {
  readonly cache: ReconcileCacheStore;
  readonly database: ReconcileDatabaseStore;
  readonly rebuilds: RebuildStore;
  readonly publish: (compensations: readonly Compensation[]) => Promise<void>;
  /** Targets per batch: bounds the memory of a pass. */
  readonly batchSize?: number;
  /** Targets idle longer than this leave Redis; 0 keeps every target. */
  readonly coldAfterSeconds?: number;
  readonly onProgress?: (progress: ReconcileProgress) => void;
}

export async function runReconcile(options: ReconcileOptions): Promise<ReconcileSummary> {
  const { cache, database } = options;
  const batchSize = options.batchSize ?? 200;
  const started = Date.now();
  const differences: Record<DifferenceKind, number> = { missingInDatabase: 0, strayInDatabase: 0, databaseCounter: 0, cacheCounter: 0 };
  let targetsChecked = 0;
  let skippedInFlight = 0;
  let repairsSent = 0;
  let evicted = 0;

  const send = async (repairs: Compensation[]) => {
    if (repairs.length === 0) return;
    await options.publish(repairs);
    repairsSent += repairs.length;
  };

  // Redis side.
  const redisTotal = await cache.size();
  let cursor: string | null = null;
  let done = 0;
  do {
    const page = await cache.scan(cursor, batchSize);
    cursor = page.cursor;
    done += page.targets.length;
    const inspected = await cache.inspect(page.targets);
    const present = inspected.filter((t): t is NonNullable<typeof t> => t !== null);
    const persisted = await database.read(present.map((t) => t.target));
    const repairs: Compensation[] = [];
    for (const [i, cached] of present.entries()) {
      const persistedTarget = persisted[i]!;
      const comparison = compareCached(cached, persistedTarget);
      targetsChecked++;
      if (comparison.inFlight) {
        skippedInFlight++;
        continue;
      }
      for (const [kind, n] of Object.entries(comparison.differences)) differences[kind as DifferenceKind] += n;
      repairs.push(...comparison.repairs);
      const cold = options.coldAfterSeconds && cached.idleSeconds > options.coldAfterSeconds;
      if (cold && comparison.repairs.length === 0 && (await options.rebuilds.evict(cached.target, persistedTarget.version)) === "evicted") evicted++;
    }
    await send(repairs);
    options.onProgress?.({ phase: "redis", done, total: Math.max(done, redisTotal) });
  } while (cursor !== null);

  // PostgreSQL side: targets Redis does not hold.
  const postgresTotal = await database.countTargets();
  let after: Target | null = null;
  done = 0;
  for (;;) {
    const page = await database.page(after, batchSize);
    if (page.length === 0) break;
    after = page.at(-1)!.target;
    done += page.length;
    const held = await cache.holds(page.map((p) => p.target));
    const repairs: Compensation[] = [];
    for (const [i, entry] of page.entries()) {
      if (held[i]) continue;
      targetsChecked++;
      const repair = compareUncached(entry.target, entry);
      if (repair) {
        differences.databaseCounter++;
        repairs.push(repair);
      }
    }
    await send(repairs);
    options.onProgress?.({ phase: "postgres", done, total: Math.max(done, postgresTotal) });
  }

  return { targetsChecked, skippedInFlight, differences, repairsSent, evicted, seconds: (Date.now() - started) / 1000 };
}
