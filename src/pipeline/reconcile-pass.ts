// One reconcile pass: the members of every relation of every target Redis holds
// (by SCAN, in bounded batches) are compared with PostgreSQL, Redis
// authoritative; then every target's relation only PostgreSQL holds (keyset
// pages), PostgreSQL authoritative; then every target's other counters (its
// derived counters against PostgreSQL's rows and Redis, a post's views); then
// every user's list Redis holds (reconcile-lists.ts).
// Differences become repair messages that the repair consumer applies.
// Quiescent cold posts and comments leave Redis on the way, to come back by a
// rebuild when next used.
//
// Memory is bounded by members, not targets: a target with more members than
// `memberChunk` on either side is never loaded whole but walked in pieces
// (walkBigTarget), so neither a batch nor one target can outgrow the heap.
import type { Logger } from "pino";
import { setTimeout as sleep } from "node:timers/promises";
import { relationsOf, targetKey, type CounterName, type CounterSurvey, type DatabaseTarget, type DifferenceKind, type RedisTarget, type Repair, type Target } from "../domain/model/index.js";
import type { DatabaseReconcileStore, InFlightTarget, RebuildStore, RedisReconcileStore, RelationTarget } from "../domain/ports/index.js";
import { compareCounters, compareHeld, compareUnheld, compareVersions, stillLagging, stuckAfterPasses, type VersionStanding } from "../domain/reconcile.js";
import { reconcileLists } from "./reconcile-lists.js";
import { redisLost, walkBigTarget, type WalkOutcome } from "./reconcile-walk.js";

/** How many targets of a kind, and the first few of them ("post:12"), for an operator to look at. */
export interface TargetTally {
  readonly count: number;
  readonly sample: readonly string[];
}

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

const sampleSize = 10;

class Tally {
  count = 0;
  readonly sample: string[] = [];
  add(target: Target): void {
    this.count++;
    if (this.sample.length < sampleSize) this.sample.push(`${target.type}:${target.id}`);
  }
  get value(): TargetTally {
    return { count: this.count, sample: this.sample };
  }
}

export async function runReconcile(options: ReconcileOptions): Promise<ReconcileSummary> {
  const { redis, database, logger } = options;
  const batchSize = options.batchSize ?? 200;
  const mirrorGraceMs = options.mirrorGraceMs ?? 1_000;
  const memberChunk = options.memberChunk ?? 10_000;
  const started = Date.now();
  const differences: Record<DifferenceKind, number> = {
    missingInDatabase: 0,
    strayInDatabase: 0,
    databaseCounter: 0,
    redisCounter: 0,
    derivedCounter: 0,
    redisDerivedCounter: 0,
    views: 0,
    list: 0,
  };
  const inFlight = new Tally();
  const stuck = new Tally();
  const rebuiltBehind = new Tally();
  const behindKept = new Tally();
  let targetsChecked = 0;
  let walked = 0;
  let repairsSent = 0;
  let evicted = 0;

  const send = async (repairs: readonly Repair[]) => {
    if (repairs.length === 0) return;
    await options.publish(repairs);
    repairsSent += repairs.length;
  };
  const count = (found: Partial<Record<DifferenceKind, number>>) => {
    for (const [kind, n] of Object.entries(found)) differences[kind as DifferenceKind] += n;
  };

  // Redis side: every relation of every target Redis holds. PostgreSQL is read before Redis
  // (compareVersions): a change made and persisted between the two reads is then in flight, never lag.
  const redisTotal = await redis.size();
  const walk = { redis, database, memberChunk, send, count };
  let cursor: string | null = null;
  let done = 0;
  do {
    const page = await redis.scan(cursor, batchSize);
    cursor = page.cursor;
    done += page.targets.length;
    const items = page.targets.flatMap((target) => relationsOf(target.type).map((relation): RelationTarget => ({ relation, target })));
    const persisted = await database.read(items, memberChunk);
    const surveyed = await redis.survey(items, memberChunk);
    const repairs: Repair[] = [];
    const seenInFlight = new Map<string, InFlightTarget>();
    // Per target: whether every relation compared clean and it may leave Redis if cold.
    const clean = new Map<string, { held: RedisTarget; persisted: DatabaseTarget; clean: boolean }>();
    const droppedBehind = new Set<string>();
    for (const [i, held] of surveyed.entries()) {
      if (held === null) continue;
      const persistedTarget = persisted[i] as DatabaseTarget;
      const key = targetKey(held.target);
      if (droppedBehind.has(key)) continue;
      targetsChecked++;
      let compared: VersionStanding | WalkOutcome = compareVersions(held.version, persistedTarget.version);
      let repaired = false;
      if (compared === "quiescent" && (held.members === null || persistedTarget.members === null)) {
        walked++;
        compared = await walkBigTarget(walk, held, persistedTarget);
        repaired = true;
      } else if (compared === "quiescent") {
        const comparison = compareHeld(held, persistedTarget, memberChunk);
        if (await redisLost(database, held, comparison.differing, held.version)) compared = "redisBehind";
        else {
          compared = "compared";
          count(comparison.differences);
          repairs.push(...comparison.repairs);
          repaired = comparison.repairs.length > 0;
        }
      }
      if (compared === "redisBehind") {
        // Redis is missing changes PostgreSQL applied: it cannot be the authority, so it gives the target up
        // and the next read rebuilds it from PostgreSQL (with every change committed after the snapshot).
        droppedBehind.add(key);
        const outcome = await options.rebuilds.drop(held.target);
        if (outcome === "kept") behindKept.add(held.target);
        else rebuiltBehind.add(held.target);
        continue;
      }
      if (compared === "inFlight" && !seenInFlight.has(key)) {
        inFlight.add(held.target);
        seenInFlight.set(key, { target: held.target, redisVersion: held.version, databaseVersion: persistedTarget.version });
      }
      const entry = clean.get(key);
      const ok = compared === "compared" && !repaired && (entry?.clean ?? true);
      clean.set(key, { held, persisted: persistedTarget, clean: ok });
    }
    // A target found to have lost changes is rebuilt from PostgreSQL, not repaired from its other relations.
    await send(repairs.filter((r) => !droppedBehind.has(targetKey(r.target))));
    if (options.coldAfterSeconds) {
      for (const [key, { held, persisted: p, clean: ok }] of clean) {
        if (!ok || droppedBehind.has(key) || held.target.type === "user" || held.idleSeconds <= options.coldAfterSeconds) continue;
        if ((await options.rebuilds.evict(held.target, p.version)) === "evicted") evicted++;
      }
    }
    if (seenInFlight.size) {
      const noted = [...seenInFlight.values()];
      const inARow = await redis.noteInFlight(noted);
      for (const [i, t] of noted.entries()) if ((inARow[i] ?? 0) >= stuckAfterPasses) stuck.add(t.target);
    }
    options.onProgress?.({ phase: "redis", done, total: Math.max(done, redisTotal) });
  } while (cursor !== null);

  // PostgreSQL side: relations of targets Redis does not hold.
  const postgresTotal = await database.countTargets();
  let after: RelationTarget | null = null;
  done = 0;
  for (;;) {
    const page = await database.page(after, batchSize);
    if (page.length === 0) break;
    after = page.at(-1)!;
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

  // Every target's other counters: derived ones against PostgreSQL's rows and Redis, views.
  const countersTotal = await database.countCounterTargets();
  let afterTarget: Target | null = null;
  done = 0;
  for (;;) {
    const page = await database.counterPage(afterTarget, batchSize);
    if (page.length === 0) break;
    afterTarget = page.at(-1)!.target;
    done += page.length;
    const inRedis = await redis.counters(page.map((p) => p.target));
    const repairs: Repair[] = [];
    const lagging: { survey: CounterSurvey; names: readonly CounterName[] }[] = [];
    for (const [i, persistedCounters] of page.entries()) {
      const held = inRedis[i] ?? null;
      const survey: CounterSurvey = { ...persistedCounters, redis: held?.values ?? null, redisVersion: held?.version ?? -1n };
      const comparison = compareCounters(survey);
      count(comparison.differences);
      repairs.push(...comparison.repairs);
      if (comparison.lagging.length > 0) lagging.push({ survey, names: comparison.lagging });
    }
    if (lagging.length > 0) {
      await sleep(mirrorGraceMs);
      const again = await redis.counters(lagging.map((l) => l.survey.target));
      for (const [i, { survey, names }] of lagging.entries()) {
        const repair = stillLagging({ ...survey, redis: again[i]?.values ?? null }, names);
        if (repair?.kind === "mirrorDerived") {
          differences.redisDerivedCounter += repair.names.length;
          repairs.push(repair);
        }
      }
    }
    await send(repairs);
    options.onProgress?.({ phase: "counters", done, total: Math.max(done, countersTotal) });
  }

  // Users' lists of liked and collected posts, against PostgreSQL's rows.
  const lists = await reconcileLists({ redis, database, batchSize, ...(options.onProgress && { onProgress: options.onProgress }) });
  differences.list = lists.dropped.length;
  if (lists.dropped.length > 0) {
    logger?.warn(
      { lists: lists.dropped.slice(0, sampleSize).map((l) => `${l.relation}:${l.userId}`), count: lists.dropped.length },
      "users' lists in Redis differed from PostgreSQL's rows: dropped, to be loaded again on their next read",
    );
  }

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
  return {
    targetsChecked,
    inFlight: inFlight.value,
    stuck: stuck.value,
    rebuiltBehind: rebuiltBehind.value,
    behindKept: behindKept.value,
    walked,
    listsChecked: lists.checked,
    differences,
    repairsSent,
    evicted,
    seconds: (Date.now() - started) / 1000,
  };
}
