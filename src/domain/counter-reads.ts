// Counts of targets and the viewer's memberships of them: read from Redis, and
// from PostgreSQL for whatever Redis does not hold or while it cannot be reached
// (cold-readouts.ts). A read never waits for a target to be loaded into Redis: what
// it answered from PostgreSQL goes to the warmer (warmer.ts), and only writes
// load the target they change first (target-loads.ts).
import { readCold, type ColdReadouts, type SecondLook } from "./cold-readouts.js";
import { counterNames, relationsOf, zeroCounts, type Counts, type Relation, type Target, type TargetType, type TargetReadout } from "./model/index.js";
import type { CounterStore, Reachability, RebuildStore } from "./ports/index.js";
import type { TargetUses } from "./target-uses.js";
import type { Warmer } from "./warmer.js";
import { tooLate, within } from "./within.js";

/** What a read of targets Redis does not hold reads from PostgreSQL: their counts (and the viewer's memberships). */
export type ColdLoad = "counts";

/** What a read may spend on targets Redis does not hold: its request's deadline and budget. */
export interface ColdReads {
  /** When the request answers whatever happens, in milliseconds since the epoch. */
  readonly deadlineAtMs?: number;
  /**
   * Pays for reading `targets` targets from PostgreSQL before any is read; throws (RATE_LIMITED)
   * when the caller's budget is spent. Waits for a budget's store until `waitUntilMs` at most.
   */
  readonly pay?: (load: ColdLoad, targets: number, waitUntilMs?: number) => Promise<void>;
}

/** What every read takes: the stores, what it hands on, and the anonymous reads of this tick. */
export interface CounterReads {
  readonly counterStore: Pick<CounterStore, "readout">;
  readonly rebuildStore: Pick<RebuildStore, "droppedVersions">;
  /** What PostgreSQL holds of targets Redis does not. */
  readonly coldReadouts: ColdReadouts;
  readonly warmer?: Warmer;
  readonly reachability?: Reachability;
  readonly uses?: TargetUses;
  /** Of a request's time, what a read keeps for PostgreSQL when Redis is slow to answer. */
  readonly reserveMs: number;
  /** Whether an error says Redis is out of reach (and so the read goes to PostgreSQL). */
  readonly outOfReach: (error: unknown) => boolean;
  // Anonymous reads of the same targets asked in the same tick share one store read (every
  // anonymous hotPosts request asks the counts of the same 100 posts). A tick's reads leave
  // Redis together at its end, so each is sent after every caller sharing it asked: as live
  // as a read of its own, never an answer from before a caller heard of a change. A viewer's
  // reads (memberships, their own changes) never share.
  readonly anonymousReads: Map<string, Promise<(TargetReadout | null)[]>>;
}

// The least a read waits for Redis, however near its deadline (a healthy Redis answers in a millisecond or two).
const minRedisWaitMs = 100;

/** A readout's memberships when the viewer is a member of nothing. */
export function noMemberships(type: TargetType): TargetReadout["viewerIn"] {
  return Object.fromEntries(relationsOf(type).map((relation) => [relation, false]));
}

const viewOfType = async (
  { counterStore, anonymousReads }: CounterReads,
  targets: readonly Target[],
  viewerId: bigint | null,
  asked: readonly Relation[] | undefined,
  exact: boolean,
): Promise<(TargetReadout | null)[]> => {
  const type = (targets[0] as Target).type;
  if (viewerId !== null) {
    const relations = relationsOf(type).filter((r) => !asked || asked.includes(r));
    return counterStore.readout(targets, { names: counterNames[type], relations, viewerId, exact });
  }
  let key = exact ? `!${type}` : (type as string);
  for (const t of targets) key += `,${t.id}`;
  let pending = anonymousReads.get(key);
  if (!pending) {
    pending = counterStore.readout(targets, { names: counterNames[type], relations: [], viewerId: null, exact });
    anonymousReads.set(key, pending);
    process.nextTick(() => anonymousReads.delete(key));
  }
  // A copy: callers fill in what they read elsewhere.
  return [...(await pending)];
};

/** One store read per type (all in the same round trip), in the order given; null where Redis does not hold a target. */
async function readoutHeld(
  reads: CounterReads,
  targets: readonly Target[],
  viewerId: bigint | null,
  asked: readonly Relation[] | undefined,
  exact: boolean,
): Promise<(TargetReadout | null)[]> {
  if (targets.length === 0) return [];
  // A list is of one type nearly always: no grouping then.
  if (targets.every((t) => t.type === (targets[0] as Target).type)) return viewOfType(reads, targets, viewerId, asked, exact);
  const byType = new Map<TargetType, number[]>();
  targets.forEach((t, i) => byType.set(t.type, [...(byType.get(t.type) ?? []), i]));
  const views: (TargetReadout | null)[] = new Array<TargetReadout | null>(targets.length).fill(null);
  await Promise.all(
    [...byType.values()].map(async (indexes) => {
      const found = await viewOfType(
        reads,
        indexes.map((i) => targets[i] as Target),
        viewerId,
        asked,
        exact,
      );
      indexes.forEach((i, j) => (views[i] = found[j] ?? null));
    }),
  );
  return views;
}

/**
 * What Redis holds of the targets (null where it holds none); `answered` false (all null)
 * when it is out of reach or cannot answer in time.
 */
async function readoutFromRedis(
  reads: CounterReads,
  targets: readonly Target[],
  viewerId: bigint | null,
  asked: readonly Relation[] | undefined,
  exact: boolean,
  deadlineAtMs: number | undefined,
): Promise<{ views: (TargetReadout | null)[]; answered: boolean }> {
  const { reachability, outOfReach, reserveMs } = reads;
  const none = { views: targets.map(() => null), answered: false };
  if (reachability && !reachability.reachable()) return none;
  const reading = readoutHeld(reads, targets, viewerId, asked, exact);
  try {
    // Past this, a stalled Redis not yet known out of reach would make the request miss its deadline
    // (its own timeout comes after the request's): the read turns to PostgreSQL instead. Never less
    // than `minRedisWaitMs`: a request already late would otherwise send every read to PostgreSQL.
    const found = deadlineAtMs === undefined ? await reading : await within(reading, Math.max(minRedisWaitMs, deadlineAtMs - reserveMs - Date.now()));
    if (found !== tooLate) return { views: found, answered: true };
    // Whatever it answers later is nobody's; an error it ends with still tells whether Redis is out of reach.
    // A late answer alone does not: a busy process or Redis is not an unreachable one.
    reading.catch(outOfReach);
    return none;
  } catch (error) {
    if (outOfReach(error)) return none;
    throw error;
  }
}

/**
 * Redis's view of targets read from PostgreSQL (those loaded meanwhile, a like's load or the
 * warmer's), and which were dropped lately; nothing where Redis cannot say in time. One read
 * of the targets and one of their drops, in that order in the same round trip: a target
 * dropped between the two is found dropped.
 */
async function secondLook(
  reads: CounterReads,
  targets: readonly Target[],
  viewerId: bigint | null,
  asked: readonly Relation[] | undefined,
  exact: boolean,
  deadlineAtMs: number | undefined,
): Promise<SecondLook> {
  const { rebuildStore, outOfReach, reserveMs } = reads;
  const nothing: SecondLook = { views: targets.map(() => null), dropped: targets.map(() => null) };
  try {
    const looked = Promise.all([readoutHeld(reads, targets, viewerId, asked, exact), rebuildStore.droppedVersions(targets)]);
    looked.catch(outOfReach);
    const found = deadlineAtMs === undefined ? await looked : await within(looked, deadlineAtMs - reserveMs - Date.now());
    if (found === tooLate) return nothing;
    const [views, dropped] = found;
    return { views, dropped };
  } catch (error) {
    if (outOfReach(error)) return nothing;
    throw error;
  }
}

/** CounterService.readout, and with `exact` its read: never from counts kept in memory, and nothing handed to the warmer. */
export async function readoutTargets(
  reads: CounterReads,
  targets: readonly Target[],
  viewerId: bigint | null,
  asked: readonly Relation[] | undefined,
  exact: boolean,
  cold: ColdReads,
): Promise<TargetReadout[]> {
  const { uses, reserveMs, warmer } = reads;
  const { views, answered } = await readoutFromRedis(reads, targets, viewerId, asked, exact, cold.deadlineAtMs);
  const absent = targets.flatMap((_, i) => (views[i] === null ? [i] : []));
  uses?.used(absent.length === 0 ? targets : targets.filter((_, i) => views[i] !== null));
  if (absent.length > 0) {
    const coldTargets = absent.map((i) => targets[i] as Target);
    await cold.pay?.("counts", coldTargets.length, cold.deadlineAtMs === undefined ? undefined : cold.deadlineAtMs - reserveMs);
    const found = await readCold(reads.coldReadouts, coldTargets, viewerId, asked, {
      ...(cold.deadlineAtMs !== undefined && { deadlineAtMs: cold.deadlineAtMs }),
      // Redis out of reach, or too slow to answer the first look: no member index, no second look.
      again: !answered ? null : (some) => secondLook(reads, some, viewerId, asked, exact, cold.deadlineAtMs),
    });
    absent.forEach((i, j) => (views[i] = found[j] ?? null));
    // Live counts read cold posts without loading them: a post is loaded by the change that makes them read again.
    // Nor is one loaded while Redis is out of reach or too slow to answer: the next read hands it in again.
    if (!exact && answered) warmer?.want(coldTargets);
  }
  return views.map((v, i) => v ?? { counts: zeroCounts((targets[i] as Target).type), viewerIn: noMemberships((targets[i] as Target).type) });
}

/** CounterService.read. */
export async function readCounts(reads: CounterReads, targets: readonly Target[], cold: ColdReads): Promise<Counts[]> {
  return (await readoutTargets(reads, targets, null, undefined, true, cold)).map((v) => v.counts);
}
