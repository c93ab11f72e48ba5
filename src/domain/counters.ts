// Counts of targets and the viewer's memberships of them: read from Redis, and
// from PostgreSQL for whatever Redis does not hold or while it cannot be reached
// (cold-views.ts). A read never waits for a target to be loaded into Redis: what
// it answered from PostgreSQL goes to the warmer (warmer.ts), and only writes
// load the target they change first (target-loads.ts).
import { setTimeout as sleep } from "node:timers/promises";
import { DomainError, ErrorCode } from "../errors.js";
import { readCold, type ColdViews, type SecondLook } from "./cold-views.js";
import {
  counterNames,
  relationsOf,
  targetKey,
  zeroCounts,
  type CounterValue,
  type Counts,
  type Relation,
  type Target,
  type TargetKey,
  type TargetType,
  type TargetView,
} from "./model/index.js";
import type { CounterStore, Reachability, RebuildStore } from "./ports/index.js";
import { createRebuildSlots, type RebuildSlots } from "./rebuild-slots.js";
import type { LoadAdmission, TargetLoader } from "./target-loads.js";
import type { TargetUses } from "./target-uses.js";
import { createUnmirrored } from "./unmirrored.js";
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

export interface CounterService {
  /**
   * Counts of existing targets as they stand now, in order, never from counts kept in
   * process memory: for a reader that heard of a change (live counts). Targets Redis
   * does not hold are read from PostgreSQL and not loaded.
   */
  read(targets: readonly Target[], cold?: ColdReads): Promise<Counts[]>;
  /**
   * What a feed shows of each target, in order: its counts and the viewer's
   * memberships of `relations` (every relation of the type unless given; none for a
   * null viewer). Targets Redis does not hold are answered from PostgreSQL and handed
   * to the warmer; one that does not exist reads as all zeros.
   */
  view(targets: readonly Target[], viewerId: bigint | null, relations?: readonly Relation[], cold?: ColdReads): Promise<TargetView[]>;
  /**
   * Puts a target back into Redis from PostgreSQL (counts and membership), one load at a
   * time across processes, for a write that needs it; false when the target does not
   * exist. Waits for one of the process's rebuild slots until `deadlineAtMs` at most
   * (SERVICE_UNAVAILABLE past it), and is refused while Redis is near its memory limit.
   */
  rebuild(target: Target, deadlineAtMs?: number): Promise<boolean>;
  /**
   * Mirrors into Redis derived counters as PostgreSQL committed them (in the same
   * transaction as their cause). A target Redis does not hold is left alone: its
   * load reads the value from PostgreSQL. While Redis is out of reach the values wait
   * in this process (the newest of each counter, 100,000 at most) and are mirrored once
   * it answers; a sequence number keeps an older value from winning.
   */
  mirror(values: readonly CounterValue[]): Promise<void>;
  /**
   * Marks a just-created target known to Redis with all its counters at zero; a Redis out of
   * reach leaves it to its first load.
   */
  initNew(target: Target, authorId?: bigint): Promise<void>;
}

export interface CounterServiceOptions {
  readonly counterStore: CounterStore;
  readonly rebuildStore: Pick<RebuildStore, "droppedVersions">;
  readonly loader: TargetLoader;
  /** What PostgreSQL holds of targets Redis does not (cold-views.ts). */
  readonly cold: ColdViews;
  /** Loads in the background what reads answered from PostgreSQL; none: nothing is loaded by reads. */
  readonly warmer?: Warmer;
  /** Whether Redis answers; without it Redis is always tried. */
  readonly reachability?: Reachability;
  /** Where the targets read from Redis (or from counts kept in memory) are noted as used, for eviction. */
  readonly uses?: TargetUses;
  /** How long a write waits for another process's load of the same target; default 10 s. */
  readonly rebuildWaitMs?: number;
  /** The process's rebuild slots, shared by view flushes and writes; 4 at once and 256 waiting unless given. */
  readonly slots?: RebuildSlots;
  /** Asked before every load: Redis's memory policy (memory-policy.ts). Without it, every load is admitted. */
  readonly admitLoad?: LoadAdmission;
  /** Of a request's time, what a read keeps for PostgreSQL when Redis is slow to answer; default 300 ms. */
  readonly postgresReserveMs?: number;
}

/** A view's memberships when the viewer is a member of nothing. */
export function noMemberships(type: TargetType): TargetView["viewerIn"] {
  return Object.fromEntries(relationsOf(type).map((relation) => [relation, false]));
}

/** Loads a write tries before it gives up on a target that keeps leaving Redis. */
export const rebuildRounds = 3;

/** Another process's load of the target did not finish in time: nothing is wrong, only slow (SERVICE_UNAVAILABLE). */
export class RebuildTimeoutError extends DomainError {
  constructor(target: Target, waitedMs: number) {
    super(ErrorCode.SERVICE_UNAVAILABLE, `${target.type} ${target.id} was still being loaded from PostgreSQL after ${waitedMs} ms; retry shortly.`);
  }
}

// eslint-disable-next-line max-lines-per-function -- the service's methods share its stores, slots and in-flight loads in one closure; the cold path lives in cold-views.ts.
export function createCounterService(options: CounterServiceOptions): CounterService {
  const { counterStore, rebuildStore, loader, warmer, reachability, admitLoad, uses } = options;
  const waitMs = options.rebuildWaitMs ?? 10_000;
  const reserveMs = options.postgresReserveMs ?? 300;
  // The least a read waits for Redis, however near its deadline (a healthy Redis answers in a millisecond or two).
  const minRedisWaitMs = 100;
  const slots = options.slots ?? createRebuildSlots({ atOnce: 4, maxWaiting: 256 });
  const rebuilding = new Map<TargetKey, Promise<boolean>>();

  /** Whether an error says Redis is out of reach (and so the read goes to PostgreSQL). */
  const outOfReach = (error: unknown) => reachability?.failed(error) ?? false;
  const unmirrored = createUnmirrored({ mirror: (values) => counterStore.mirror(values), reachability, outOfReach });

  async function rebuildOnce(target: Target, deadlineAtMs: number): Promise<boolean> {
    const started = Date.now();
    for (let round = 0; ;) {
      const [outcome] = await loader.load([target]);
      switch (outcome) {
        case "loaded":
        case "held":
          return true;
        case "missing":
          return false;
        case "dropped":
          // Dropped again right after its load (a late change, a reconcile repair): loaded once more.
          if (++round < rebuildRounds) continue;
          throw new DomainError(ErrorCode.SERVICE_UNAVAILABLE, `The counters of ${target.type} ${target.id} are being repaired; retry shortly.`);
        default:
          // Another process is loading it (or a load ran out of its lease): wait for its counter hash.
          if (Date.now() - started > waitMs || Date.now() >= deadlineAtMs) throw new RebuildTimeoutError(target, Date.now() - started);
          await sleep(20);
          if ((await counterStore.read([target]))[0] !== null) return true;
      }
    }
  }

  const rebuild = (target: Target, deadlineAtMs = Date.now() + waitMs): Promise<boolean> => {
    const key = targetKey(target);
    // Concurrent writes in this process share one load, and the first one's deadline.
    let pending = rebuilding.get(key);
    if (!pending) {
      const admitted = admitLoad ? admitLoad() : Promise.resolve();
      pending = admitted.then(() => slots.run(() => rebuildOnce(target, deadlineAtMs), deadlineAtMs)).finally(() => rebuilding.delete(key));
      rebuilding.set(key, pending);
    }
    return pending;
  };

  // Anonymous reads of the same targets asked in the same tick share one store read (every
  // anonymous hotPosts request asks the counts of the same 100 posts). A tick's reads leave
  // Redis together at its end, so each is sent after every caller sharing it asked: as live
  // as a read of its own, never an answer from before a caller heard of a change. A viewer's
  // reads (memberships, their own changes) never share.
  const anonymousReads = new Map<string, Promise<(TargetView | null)[]>>();
  const viewOfType = async (
    targets: readonly Target[],
    viewerId: bigint | null,
    asked: readonly Relation[] | undefined,
    exact: boolean,
  ): Promise<(TargetView | null)[]> => {
    const type = (targets[0] as Target).type;
    if (viewerId !== null) {
      const relations = relationsOf(type).filter((r) => !asked || asked.includes(r));
      return counterStore.view(targets, { names: counterNames[type], relations, viewerId, exact });
    }
    let key = exact ? `!${type}` : (type as string);
    for (const t of targets) key += `,${t.id}`;
    let pending = anonymousReads.get(key);
    if (!pending) {
      pending = counterStore.view(targets, { names: counterNames[type], relations: [], viewerId: null, exact });
      anonymousReads.set(key, pending);
      process.nextTick(() => anonymousReads.delete(key));
    }
    // A copy: callers fill in what they read elsewhere.
    return [...(await pending)];
  };

  /** One store read per type (all in the same round trip), in the order given; null where Redis does not hold a target. */
  async function viewHeld(
    targets: readonly Target[],
    viewerId: bigint | null,
    asked: readonly Relation[] | undefined,
    exact: boolean,
  ): Promise<(TargetView | null)[]> {
    if (targets.length === 0) return [];
    // A list is of one type nearly always: no grouping then.
    if (targets.every((t) => t.type === (targets[0] as Target).type)) return viewOfType(targets, viewerId, asked, exact);
    const byType = new Map<TargetType, number[]>();
    targets.forEach((t, i) => byType.set(t.type, [...(byType.get(t.type) ?? []), i]));
    const views: (TargetView | null)[] = new Array<TargetView | null>(targets.length).fill(null);
    await Promise.all(
      [...byType.values()].map(async (indexes) => {
        const found = await viewOfType(
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
  async function viewFromRedis(
    targets: readonly Target[],
    viewerId: bigint | null,
    asked: readonly Relation[] | undefined,
    exact: boolean,
    deadlineAtMs: number | undefined,
  ): Promise<{ views: (TargetView | null)[]; answered: boolean }> {
    const none = { views: targets.map(() => null), answered: false };
    if (reachability && !reachability.reachable()) return none;
    const reading = viewHeld(targets, viewerId, asked, exact);
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
    targets: readonly Target[],
    viewerId: bigint | null,
    asked: readonly Relation[] | undefined,
    exact: boolean,
    deadlineAtMs: number | undefined,
  ): Promise<SecondLook> {
    const nothing: SecondLook = { views: targets.map(() => null), dropped: targets.map(() => null) };
    try {
      const looked = Promise.all([viewHeld(targets, viewerId, asked, exact), rebuildStore.droppedVersions(targets)]);
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

  async function view(
    targets: readonly Target[],
    viewerId: bigint | null,
    asked: readonly Relation[] | undefined,
    exact: boolean,
    cold: ColdReads,
  ): Promise<TargetView[]> {
    const { views, answered } = await viewFromRedis(targets, viewerId, asked, exact, cold.deadlineAtMs);
    const absent = targets.flatMap((_, i) => (views[i] === null ? [i] : []));
    uses?.used(absent.length === 0 ? targets : targets.filter((_, i) => views[i] !== null));
    if (absent.length > 0) {
      const coldTargets = absent.map((i) => targets[i] as Target);
      await cold.pay?.("counts", coldTargets.length, cold.deadlineAtMs === undefined ? undefined : cold.deadlineAtMs - reserveMs);
      const found = await readCold(options.cold, coldTargets, viewerId, asked, {
        ...(cold.deadlineAtMs !== undefined && { deadlineAtMs: cold.deadlineAtMs }),
        // Redis out of reach, or too slow to answer the first look: no member index, no second look.
        again: !answered ? null : (some) => secondLook(some, viewerId, asked, exact, cold.deadlineAtMs),
      });
      absent.forEach((i, j) => (views[i] = found[j] ?? null));
      // Live counts read cold posts without loading them: a post is loaded by the change that makes them read again.
      // Nor is one loaded while Redis is out of reach or too slow to answer: the next read hands it in again.
      if (!exact && answered) warmer?.want(coldTargets);
    }
    return views.map((v, i) => v ?? { counts: zeroCounts((targets[i] as Target).type), viewerIn: noMemberships((targets[i] as Target).type) });
  }

  return {
    rebuild,
    view: (targets, viewerId, relations, cold = {}) => view(targets, viewerId, relations, false, cold),
    async read(targets, cold = {}) {
      return (await view(targets, null, undefined, true, cold)).map((v) => v.counts);
    },
    async mirror(values) {
      if (values.length === 0) return;
      if (reachability && !reachability.reachable()) return unmirrored.keep(values);
      try {
        await counterStore.mirror(values);
      } catch (error) {
        if (!outOfReach(error)) throw error;
        unmirrored.keep(values);
      }
    },
    async initNew(target, authorId) {
      loader.created(target);
      if (reachability && !reachability.reachable()) return;
      try {
        await counterStore.init(target, { [counterNames[target.type][0]]: 0 }, authorId);
      } catch (error) {
        if (!outOfReach(error)) throw error;
      }
    },
  };
}
