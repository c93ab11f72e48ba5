// One reconcile pass: the members of every relation of every target Redis holds
// (by SCAN, in bounded batches) are compared with PostgreSQL, Redis
// authoritative; then every target's relation only PostgreSQL holds (keyset
// pages), PostgreSQL authoritative; then every target's other counters (its
// derived counters against PostgreSQL's rows and Redis, a post's views); then
// every user's list Redis holds (reconcile-lists.ts). Each is a phase
// (reconcile-phases.ts) that adds to the pass's one tally (reconcile-tally.ts),
// which becomes its summary.
// Differences become repair messages that the repair consumer applies.
// Quiescent cold posts and comments leave Redis on the way, to come back by a
// rebuild when next used.
//
// Memory is bounded by members, not targets: a target with more members than
// `memberChunk` on either side is never loaded whole but walked in pieces
// (walkBigTarget), so neither a batch nor one target can outgrow the heap.
import type { Logger } from "pino";
import type { DifferenceKind, Repair } from "../domain/model/index.js";
import type { DatabaseReconcileStore, RebuildStore, RedisReconcileStore } from "../domain/ports/index.js";
import { stuckAfterPasses } from "../domain/reconcile.js";
import { compareOtherCounters, compareTargetsOnlyPostgresHolds, compareTargetsRedisHolds, compareUsersLists, type PassContext } from "./reconcile-phases.js";
import { ReconcileTally, type TargetTally } from "./reconcile-tally.js";

export type { TargetTally } from "./reconcile-tally.js";

export interface ReconcileSummary {
  readonly targetsChecked: number;
  /** Targets not compared because Redis holds changes PostgreSQL has not applied yet. */
  readonly inFlight: TargetTally;
  /** Of those, targets found in flight at the same versions `stuckAfterPasses` passes in a row: the pipeline is not bringing them together. */
  readonly stuck: TargetTally;
  /** Targets whose Redis lacked changes PostgreSQL applied, taken out of Redis to be rebuilt from PostgreSQL on next use. */
  readonly rebuiltBehind: TargetTally;
  /** Targets whose Redis lacked changes PostgreSQL applied but that Redis refused to let go. */
  readonly behindKept: TargetTally;
  /** Targets too big to load whole, compared in pieces. */
  readonly walked: number;
  /** Users' lists Redis holds that were compared; those that differed count in `differences.list`, dropped to be loaded again. */
  readonly listsChecked: number;
  readonly differences: Record<DifferenceKind, number>;
  readonly repairsSent: number;
  readonly evicted: number;
  readonly seconds: number;
}

export interface ReconcileProgress {
  readonly phase: "redis" | "postgres" | "counters" | "lists";
  /** Targets done in this phase, and an estimate of the phase's total. */
  readonly done: number;
  readonly total: number;
}

export interface ReconcileOptions {
  readonly redis: RedisReconcileStore;
  readonly database: DatabaseReconcileStore;
  readonly rebuilds: RebuildStore;
  readonly publish: (repairs: readonly Repair[]) => Promise<void>;
  /** Targets per batch. */
  readonly batchSize?: number;
  /** Members loaded at once: a target with more is walked in pieces of this size; also the most users one repair names. */
  readonly memberChunk?: number;
  /** Targets idle longer than this leave Redis; 0 keeps every target. */
  readonly coldAfterSeconds?: number;
  readonly onProgress?: (progress: ReconcileProgress) => void;
  /** Where stuck targets and targets rebuilt for lacking changes are reported. */
  readonly logger?: Logger;
  /**
   * How long a derived counter Redis holds an older write of is given to catch up
   * (its mirror follows the commit within moments) before it is mirrored again.
   */
  readonly mirrorGraceMs?: number;
}

export async function runReconcile(options: ReconcileOptions): Promise<ReconcileSummary> {
  const started = Date.now();
  const tally = new ReconcileTally();
  const pass: PassContext = {
    redis: options.redis,
    database: options.database,
    rebuilds: options.rebuilds,
    batchSize: options.batchSize ?? 200,
    memberChunk: options.memberChunk ?? 10_000,
    mirrorGraceMs: options.mirrorGraceMs ?? 1_000,
    coldAfterSeconds: options.coldAfterSeconds,
    logger: options.logger,
    onProgress: options.onProgress,
    tally,
    send: async (repairs) => {
      if (repairs.length === 0) return;
      await options.publish(repairs);
      tally.repairsSent += repairs.length;
    },
    count: (found) => tally.countDifferences(found),
  };
  await compareTargetsRedisHolds(pass);
  await compareTargetsOnlyPostgresHolds(pass);
  await compareOtherCounters(pass);
  await compareUsersLists(pass);
  warnOfTroubledTargets(tally, options.logger);
  return {
    targetsChecked: tally.targetsChecked,
    inFlight: tally.inFlight.value,
    stuck: tally.stuck.value,
    rebuiltBehind: tally.rebuiltBehind.value,
    behindKept: tally.behindKept.value,
    walked: tally.walked,
    listsChecked: tally.listsChecked,
    differences: tally.differences,
    repairsSent: tally.repairsSent,
    evicted: tally.evicted,
    seconds: (Date.now() - started) / 1000,
  };
}

/** Targets a pass cannot bring together by repairs, for an operator to look into. */
function warnOfTroubledTargets(tally: ReconcileTally, logger: Logger | undefined): void {
  const { stuck, rebuiltBehind, behindKept } = tally;
  if (stuck.count > 0) {
    logger?.warn(
      { stuck: stuck.value, passesInARow: stuckAfterPasses },
      `${stuck.count} targets stayed in flight without progress for ${stuckAfterPasses} reconcile passes: Redis holds changes PostgreSQL never applied (look for dead-lettered changes)`,
    );
  }
  if (rebuiltBehind.count + behindKept.count > 0) {
    logger?.warn(
      { rebuilt: rebuiltBehind.value, kept: behindKept.value },
      "Redis lacked changes PostgreSQL had applied (lost writes, e.g. a failover): those targets were taken out of Redis to be rebuilt",
    );
  }
}
