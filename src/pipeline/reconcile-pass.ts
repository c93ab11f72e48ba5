// One reconcile pass: every target Redis holds (by SCAN, in bounded batches) is
// compared with PostgreSQL, Redis authoritative; then every target only
// PostgreSQL holds (keyset pages), PostgreSQL authoritative. Differences become
// repair messages that the repair consumer applies. Quiescent cold
// targets leave Redis on the way, to come back by a rebuild when next used.
import type { DifferenceKind, LikeableTarget, Repair } from "../domain/model.js";
import type { DatabaseReconcileStore, RebuildStore, RedisReconcileStore } from "../domain/ports.js";
import { compareHeld, compareUnheld } from "../domain/reconcile.js";

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
  readonly redis: RedisReconcileStore;
  readonly database: DatabaseReconcileStore;
  readonly rebuilds: RebuildStore;
  readonly publish: (repairs: readonly Repair[]) => Promise<void>;
  /** Targets per batch: bounds the memory of a pass. */
  readonly batchSize?: number;
  /** Targets idle longer than this leave Redis; 0 keeps every target. */
  readonly coldAfterSeconds?: number;
  readonly onProgress?: (progress: ReconcileProgress) => void;
}

export async function runReconcile(options: ReconcileOptions): Promise<ReconcileSummary> {
  const { redis, database } = options;
  const batchSize = options.batchSize ?? 200;
  const started = Date.now();
  const differences: Record<DifferenceKind, number> = { missingInDatabase: 0, strayInDatabase: 0, databaseCounter: 0, redisCounter: 0 };
  let targetsChecked = 0;
  let skippedInFlight = 0;
  let repairsSent = 0;
  let evicted = 0;

  const send = async (repairs: Repair[]) => {
    if (repairs.length === 0) return;
    await options.publish(repairs);
    repairsSent += repairs.length;
  };

  // Redis side.
  const redisTotal = await redis.size();
  let cursor: string | null = null;
  let done = 0;
  do {
    const page = await redis.scan(cursor, batchSize);
    cursor = page.cursor;
    done += page.targets.length;
    const inspected = await redis.inspect(page.targets);
    const present = inspected.filter((t): t is NonNullable<typeof t> => t !== null);
    const persisted = await database.read(present.map((t) => t.target));
    const repairs: Repair[] = [];
    for (const [i, held] of present.entries()) {
      const persistedTarget = persisted[i]!;
      const comparison = compareHeld(held, persistedTarget);
      targetsChecked++;
      if (comparison.inFlight) {
        skippedInFlight++;
        continue;
      }
      for (const [kind, n] of Object.entries(comparison.differences)) differences[kind as DifferenceKind] += n;
      repairs.push(...comparison.repairs);
      const cold = options.coldAfterSeconds && held.idleSeconds > options.coldAfterSeconds;
      if (cold && comparison.repairs.length === 0 && (await options.rebuilds.evict(held.target, persistedTarget.version)) === "evicted") evicted++;
    }
    await send(repairs);
    options.onProgress?.({ phase: "redis", done, total: Math.max(done, redisTotal) });
  } while (cursor !== null);

  // PostgreSQL side: targets Redis does not hold.
  const postgresTotal = await database.countTargets();
  let after: LikeableTarget | null = null;
  done = 0;
  for (;;) {
    const page = await database.page(after, batchSize);
    if (page.length === 0) break;
    after = page.at(-1)!.target;
    done += page.length;
    const held = await redis.holds(page.map((p) => p.target));
    const repairs: Repair[] = [];
    for (const [i, entry] of page.entries()) {
      if (held[i]) continue;
      targetsChecked++;
      const repair = compareUnheld(entry);
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
