// What a read shows of targets Redis does not hold (cold, evicted, flushed, or
// Redis out of reach): PostgreSQL's counts and the viewer's memberships, in two
// statements for the whole page, without loading anything into Redis.
//
// What PostgreSQL holds is what the pipeline committed: the counts at most the
// pipeline's lag behind. Redis is asked again afterwards, so a target a change
// loaded meanwhile (a like loads its post first) is answered from Redis, never
// older than a change acknowledged before this read; the viewer's own changes
// therefore show, since each loaded its target before it was acknowledged. A
// target dropped from Redis with changes still on their way to PostgreSQL is
// answered once PostgreSQL holds them, or at the read's time limit with what it
// holds then.
import { setTimeout as sleep } from "node:timers/promises";
import { relationsOf, zeroCounts, type Relation, type Target, type TargetReadout } from "./model/index.js";
import type { MemberIndexLookup, PersistedCounts, SnapshotStore } from "./ports/index.js";
import { tooLate, within } from "./within.js";

/** Where cold reads find their answers. */
export interface ColdReadouts {
  readonly persisted: PersistedCounts;
  readonly snapshots: Pick<SnapshotStore, "newestChange">;
  /**
   * Viewers' member indexes, where Redis keeps them: a complete one rules out the targets
   * its viewer never joined, so PostgreSQL is asked the memberships of the others only.
   */
  readonly indexes?: MemberIndexLookup;
}

/** What Redis says of targets after PostgreSQL was read: its readout where it holds one, and whether each was dropped lately. */
export interface SecondLook {
  readonly views: readonly (TargetReadout | null)[];
  /** The version a target dropped within the last hour had last stamped, or null. */
  readonly dropped: readonly (bigint | null)[];
}

export interface ColdReadOptions {
  /** When the read must answer, in milliseconds since the epoch; a dropped target is waited for until shortly before. */
  readonly deadlineAtMs?: number;
  /**
   * Asks Redis again for targets it may have loaded meanwhile, and which were dropped;
   * null while it is out of reach (and, from the caller, nothing when it is too slow).
   */
  readonly again: ((targets: readonly Target[]) => Promise<SecondLook>) | null;
}

/** How long a read waits at most for a dropped target's changes, when its request sets no deadline. */
const droppedWaitMs = 3_000;
/** Of a request's time, what is kept for the last statements after waiting for a dropped target. */
const answerReserveMs = 200;

/**
 * The viewer's memberships of `relations` per target, in order: each relation's member
 * index rules out what it can (one command), PostgreSQL answers the rest (one statement).
 */
async function membershipsOf(
  cold: ColdReadouts,
  viewerId: bigint,
  targets: readonly Target[],
  relations: readonly Relation[],
  indexesUntilMs: number | null,
): Promise<Partial<Record<Relation, boolean>>[]> {
  const ruledOut = new Map<Relation, boolean[]>();
  const { indexes } = cold;
  const type = (targets[0] as Target).type;
  if (indexes && indexesUntilMs !== null && targets.every((t) => t.type === type)) {
    const ids = targets.map((t) => t.id);
    // The indexes live in Redis: a slow answer is no answer, and PostgreSQL is asked instead.
    const asking = Promise.all(relations.map((relation) => indexes.rulesOut(relation, type, viewerId, ids).catch(() => null)));
    const found = await within(asking, indexesUntilMs - Date.now());
    relations.forEach((relation, j) => {
      const answer = found === tooLate ? null : found[j];
      if (answer) ruledOut.set(relation, answer);
    });
  }
  const open = targets.flatMap((_, i) => (relations.every((r) => ruledOut.get(r)?.[i]) ? [] : [i]));
  const found =
    open.length > 0
      ? await cold.persisted.memberships(
          viewerId,
          open.map((i) => targets[i] as Target),
          relations,
        )
      : [];
  const memberships = targets.map((): Partial<Record<Relation, boolean>> => ({}));
  open.forEach((i, j) => (memberships[i] = found[j] ?? {}));
  return memberships;
}

/**
 * The views PostgreSQL holds of `targets`, with the viewer's memberships of the relations asked;
 * member indexes are asked until `indexesUntilMs`, or not at all (null: Redis out of reach).
 */
async function fromPostgres(
  cold: ColdReadouts,
  targets: readonly Target[],
  viewerId: bigint | null,
  asked: readonly Relation[] | undefined,
  indexesUntilMs: number | null,
): Promise<TargetReadout[]> {
  const relations = [...new Set(targets.flatMap((t) => relationsOf(t.type)))].filter((r) => !asked || asked.includes(r));
  const [counts, memberships] = await Promise.all([
    cold.persisted.counts(targets),
    viewerId !== null && relations.length > 0 ? membershipsOf(cold, viewerId, targets, relations, indexesUntilMs) : null,
  ]);
  return targets.map((target, i) => {
    const viewerIn: Partial<Record<Relation, boolean>> = {};
    for (const relation of relationsOf(target.type)) if (!asked || asked.includes(relation)) viewerIn[relation] = memberships?.[i]?.[relation] ?? false;
    return { counts: { ...zeroCounts(target.type), ...counts[i] }, viewerIn };
  });
}

/** Waits until PostgreSQL holds a dropped target's last change, or until `untilMs`; whether it does. */
async function caughtUp(cold: ColdReadouts, target: Target, dropped: bigint, untilMs: number): Promise<boolean> {
  for (;;) {
    if ((await cold.snapshots.newestChange(target)) >= dropped) return true;
    if (Date.now() + 50 >= untilMs) return false;
    await sleep(50);
  }
}

/** The views of targets Redis did not hold, in order. */
export async function readCold(
  cold: ColdReadouts,
  targets: readonly Target[],
  viewerId: bigint | null,
  asked: readonly Relation[] | undefined,
  options: ColdReadOptions,
): Promise<TargetReadout[]> {
  // Redis out of reach: no index is asked. Otherwise, at most until shortly before the deadline.
  const indexesUntilMs = options.again ? (options.deadlineAtMs ?? Date.now() + droppedWaitMs) - answerReserveMs : null;
  const views = await fromPostgres(cold, targets, viewerId, asked, indexesUntilMs);
  if (!options.again) return views;
  const { views: again, dropped } = await options.again(targets);
  const late: number[] = [];
  targets.forEach((_, i) => {
    const held = again[i];
    if (held) views[i] = held;
    else if (dropped[i] !== null && dropped[i] !== undefined) late.push(i);
  });
  if (late.length === 0) return views;
  const untilMs = options.deadlineAtMs === undefined ? Date.now() + droppedWaitMs : options.deadlineAtMs - answerReserveMs;
  const waited = await Promise.all(late.map((i) => caughtUp(cold, targets[i] as Target, dropped[i] as bigint, untilMs)));
  const settled = late.filter((_, j) => waited[j]);
  if (settled.length > 0) {
    const found = await fromPostgres(
      cold,
      settled.map((i) => targets[i] as Target),
      viewerId,
      asked,
      null,
    );
    settled.forEach((i, j) => (views[i] = found[j] as TargetReadout));
  }
  return views;
}
