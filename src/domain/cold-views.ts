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
import { relationsOf, zeroCounts, type Relation, type Target, type TargetView } from "./model/index.js";
import type { PersistedViews, SnapshotStore } from "./ports/index.js";

/** Where cold reads find their answers. */
export interface ColdViews {
  readonly persisted: PersistedViews;
  readonly snapshots: Pick<SnapshotStore, "newestVersion">;
}

export interface ColdReadOptions {
  /** When the read must answer, in milliseconds since the epoch; a dropped target is waited for until shortly before. */
  readonly deadlineAtMs?: number;
  /** Asks Redis again for targets it may have loaded meanwhile; null while it is out of reach. */
  readonly again: ((targets: readonly Target[]) => Promise<(TargetView | null)[]>) | null;
  /** The version a target dropped within the last hour had last stamped, or null. */
  readonly droppedVersion: (target: Target) => Promise<bigint | null>;
}

/** How long a read waits at most for a dropped target's changes, when its request sets no deadline. */
const droppedWaitMs = 3_000;
/** Of a request's time, what is kept for the last statements after waiting for a dropped target. */
const answerReserveMs = 200;

/** The views PostgreSQL holds of `targets`, with the viewer's memberships of the relations asked. */
async function fromPostgres(
  cold: ColdViews,
  targets: readonly Target[],
  viewerId: bigint | null,
  asked: readonly Relation[] | undefined,
): Promise<TargetView[]> {
  const relations = [...new Set(targets.flatMap((t) => relationsOf(t.type)))].filter((r) => !asked || asked.includes(r));
  const [counts, memberships] = await Promise.all([
    cold.persisted.counts(targets),
    viewerId !== null && relations.length > 0 ? cold.persisted.memberships(viewerId, targets, relations) : null,
  ]);
  return targets.map((target, i) => {
    const viewerIn: Partial<Record<Relation, boolean>> = {};
    for (const relation of relationsOf(target.type)) if (!asked || asked.includes(relation)) viewerIn[relation] = memberships?.[i]?.[relation] ?? false;
    return { counts: { ...zeroCounts(target.type), ...counts[i] }, viewerIn };
  });
}

/** Waits until PostgreSQL holds a dropped target's last change, or until `untilMs`; whether it does. */
async function caughtUp(cold: ColdViews, target: Target, dropped: bigint, untilMs: number): Promise<boolean> {
  for (;;) {
    if ((await cold.snapshots.newestVersion(target)) >= dropped) return true;
    if (Date.now() + 50 >= untilMs) return false;
    await sleep(50);
  }
}

/** The views of targets Redis did not hold, in order. */
export async function readCold(
  cold: ColdViews,
  targets: readonly Target[],
  viewerId: bigint | null,
  asked: readonly Relation[] | undefined,
  options: ColdReadOptions,
): Promise<TargetView[]> {
  const views = await fromPostgres(cold, targets, viewerId, asked);
  if (!options.again) return views;
  const [again, dropped] = await Promise.all([options.again(targets), Promise.all(targets.map((t) => options.droppedVersion(t).catch(() => null)))]);
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
    );
    settled.forEach((i, j) => (views[i] = found[j] as TargetView));
  }
  return views;
}
