// The load of targets whose rebuild locks are taken (target-loads.ts): read from one
// PostgreSQL snapshot, written into Redis under the locks, then brought up to date
// with what committed after the snapshot.
import { setTimeout as sleep } from "node:timers/promises";
import { zeroCounts, type CounterValue, type Target } from "./model/index.js";
import type { CommittedSince, CounterStore, RebuildStore, SnapshotStore } from "./ports/index.js";

/** What became of a locked target: loaded now, held already, dropped again right after, or abandoned (past its lease). */
export type SnapshotLoadOutcome = "loaded" | "held" | "dropped" | "abandoned";

/** What a load of locked targets takes. */
export interface SnapshotLoads {
  readonly rebuildStore: Pick<RebuildStore, "write" | "drop" | "replay" | "replayViews">;
  readonly snapshots: Pick<SnapshotStore, "read" | "newestChange" | "changesSince">;
  readonly counterStore: Pick<CounterStore, "mirror">;
  /** The rebuild lock's lease: the longest a load may take. */
  readonly leaseMs: number;
  /** How long a load of a dropped target waits for its changes in flight to reach PostgreSQL. */
  readonly droppedWaitMs: number;
}

/** Of the lease, what a load keeps unused before it writes: writes sent before then land well within it. */
const leaseMarginMs = 5_000;

/**
 * A target dropped with changes in flight is loaded once PostgreSQL holds the last of
 * them, or after `droppedWaitMs`: a snapshot without them would answer from an older
 * state until they are replayed. The replay still covers whatever arrives later.
 */
async function awaitDroppedChanges({ snapshots, droppedWaitMs }: SnapshotLoads, target: Target, dropped: bigint | null): Promise<void> {
  if (dropped === null) return;
  const until = Date.now() + droppedWaitMs;
  while ((await snapshots.newestChange(target)) < dropped && Date.now() < until) await sleep(50);
}

/**
 * Brings in what committed after the snapshot `mark`; false for a target that then had to
 * go again. A target not brought up to date (too late, or a failure on the way) goes, to be
 * loaded again whole: left, it would answer without those changes until reconcile.
 */
async function replayCommittedSince(
  loads: SnapshotLoads,
  targets: readonly Target[],
  mark: string,
  epochs: readonly bigint[],
): Promise<{ complete: boolean[]; derived: CounterValue[] }> {
  const { snapshots, rebuildStore } = loads;
  let committed: CommittedSince[];
  try {
    committed = await snapshots.changesSince(targets, mark);
  } catch (error) {
    await Promise.allSettled(targets.map((target) => rebuildStore.drop(target)));
    throw error;
  }
  const replayed = await Promise.allSettled(targets.map((target, i) => replayInto(loads, target, epochs[i] as bigint, committed[i])));
  const failed = replayed.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) throw failed.reason;
  const complete = replayed.map((r) => (r as PromiseFulfilledResult<boolean>).value);
  // Of the targets still held only: one a replay took out comes back whole.
  return { complete, derived: committed.flatMap((since, i) => (complete[i] ? since.derived : [])) };
}

async function replayInto(
  { rebuildStore }: SnapshotLoads,
  target: Target,
  intoEpoch: bigint,
  since: CommittedSince = { changes: [], views: [], derived: [] },
): Promise<boolean> {
  let complete = false;
  try {
    for (const change of since.changes) {
      if ((await rebuildStore.replay({ target, ...change, intoEpoch })) === "tooLate") return false;
    }
    for (const views of since.views) {
      if ((await rebuildStore.replayViews({ target, ...views, intoEpoch })) === "tooLate") return false;
    }
    complete = true;
    return true;
  } finally {
    if (!complete) await rebuildStore.drop(target);
  }
}

/** Loads the locked targets from one snapshot; what became of each. */
export async function loadLocked(
  loads: SnapshotLoads,
  targets: readonly Target[],
  tokens: readonly string[],
  authors: readonly (bigint | null)[],
  dropped: readonly (bigint | null)[],
  startedAt: number,
): Promise<SnapshotLoadOutcome[]> {
  const { snapshots, rebuildStore, counterStore, leaseMs } = loads;
  await Promise.all(targets.map((target, i) => awaitDroppedChanges(loads, target, dropped[i] ?? null)));
  const found = await snapshots.read(targets);
  if (Date.now() > startedAt + leaseMs - leaseMarginMs) return targets.map(() => "abandoned");
  // Settled each: a target whose write failed may still have been written (its reply lost),
  // so it goes again below; the others are brought up to date before the failure is thrown.
  const written = await Promise.allSettled(
    targets.map((target, i) => {
      const snapshot = found[i] as (typeof found)[number];
      return rebuildStore.write(target, { ...snapshot, counts: { ...zeroCounts(target.type), ...snapshot.counts } }, authors[i] ?? null, tokens[i] as string);
    }),
  );
  const outcomes: SnapshotLoadOutcome[] = written.map((w) =>
    w.status === "rejected" ? "abandoned" : w.value === "written" ? "loaded" : w.value === "held" ? "held" : "abandoned",
  );
  const failedWrite = written.find((w): w is PromiseRejectedResult => w.status === "rejected");
  if (failedWrite) await Promise.allSettled(targets.flatMap((target, i) => (written[i]?.status === "rejected" ? [rebuildStore.drop(target)] : [])));
  const fresh = targets.filter((_, i) => outcomes[i] === "loaded");
  if (fresh.length === 0) {
    if (failedWrite) throw failedWrite.reason;
    return outcomes;
  }
  // Changes committed between the snapshot and the hash appearing were not replayed by
  // the consumer (it found no rebuilt hash): bring them in now. Repeats are harmless.
  const mark = (found[0] as (typeof found)[number]).mark;
  // Derived counters mirrored between the snapshot and the hash appearing found no hash and were left:
  // mirrored as they stand now, after the replays (a sequence number keeps an older value from winning;
  // a target a replay took out again is left alone by the mirror).
  const { complete, derived } = await replayCommittedSince(
    loads,
    fresh,
    mark,
    targets.flatMap((_, i) => (outcomes[i] === "loaded" ? [(found[i] as (typeof found)[number]).epoch] : [])),
  );
  if (derived.length > 0) await counterStore.mirror(derived);
  if (failedWrite) throw failedWrite.reason;
  let j = 0;
  return outcomes.map((outcome) => (outcome === "loaded" ? (complete[j++] ? "loaded" : "dropped") : outcome));
}
