// The counter service: its reads (counter-reads.ts), the loads writes wait for
// (target-rebuilds.ts), and the writes below, which mirror into Redis what
// PostgreSQL committed and mark new targets known.
import type { ColdReadouts } from "./cold-readouts.js";
import { readCounts, readoutTargets, type ColdReads, type CounterReads } from "./counter-reads.js";
import { counterNames, type Counts, type CounterValue, type Relation, type Target, type TargetReadout } from "./model/index.js";
import type { CounterStore, Reachability, RebuildStore } from "./ports/index.js";
import { createRebuildSlots, type RebuildSlots } from "./rebuild-slots.js";
import type { LoadAdmission, TargetLoader } from "./target-loads.js";
import { rebuild, type TargetRebuilds } from "./target-rebuilds.js";
import type { TargetUses } from "./target-uses.js";
import { createUnmirrored, type Unmirrored } from "./unmirrored.js";
import type { Warmer } from "./warmer.js";

export { noMemberships, type ColdLoad, type ColdReads } from "./counter-reads.js";
export { rebuildRounds, RebuildTimeoutError } from "./target-rebuilds.js";

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
  readout(targets: readonly Target[], viewerId: bigint | null, relations?: readonly Relation[], cold?: ColdReads): Promise<TargetReadout[]>;
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
  /** What PostgreSQL holds of targets Redis does not (cold-readouts.ts). */
  readonly cold: ColdReadouts;
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

/** What the writes take. */
interface CounterWrites {
  readonly counterStore: Pick<CounterStore, "mirror" | "init">;
  readonly loader: Pick<TargetLoader, "created">;
  readonly reachability?: Reachability;
  readonly outOfReach: (error: unknown) => boolean;
  readonly unmirrored: Unmirrored;
}

async function mirror({ counterStore, reachability, outOfReach, unmirrored }: CounterWrites, values: readonly CounterValue[]): Promise<void> {
  if (values.length === 0) return;
  if (reachability && !reachability.reachable()) return unmirrored.keep(values);
  try {
    await counterStore.mirror(values);
  } catch (error) {
    if (!outOfReach(error)) throw error;
    unmirrored.keep(values);
  }
}

async function initNew({ counterStore, loader, reachability, outOfReach }: CounterWrites, target: Target, authorId?: bigint): Promise<void> {
  loader.created(target);
  if (reachability && !reachability.reachable()) return;
  try {
    await counterStore.init(target, { [counterNames[target.type][0]]: 0 }, authorId);
  } catch (error) {
    if (!outOfReach(error)) throw error;
  }
}

export function createCounterService(options: CounterServiceOptions): CounterService {
  const { counterStore, rebuildStore, loader, warmer, reachability, admitLoad, uses } = options;
  /** Whether an error says Redis is out of reach (and so the read goes to PostgreSQL). */
  const outOfReach = (error: unknown) => reachability?.failed(error) ?? false;
  const rebuilds: TargetRebuilds = {
    counterStore,
    loader,
    admitLoad,
    waitMs: options.rebuildWaitMs ?? 10_000,
    slots: options.slots ?? createRebuildSlots({ atOnce: 4, maxWaiting: 256 }),
    inFlight: new Map(),
  };
  const reads: CounterReads = {
    counterStore,
    rebuildStore,
    coldReadouts: options.cold,
    warmer,
    reachability,
    uses,
    reserveMs: options.postgresReserveMs ?? 300,
    outOfReach,
    anonymousReads: new Map(),
  };
  const unmirrored = createUnmirrored({ mirror: (values) => counterStore.mirror(values), reachability, outOfReach });
  const writes: CounterWrites = { counterStore, loader, reachability, outOfReach, unmirrored };
  return {
    rebuild: (target, deadlineAtMs) => rebuild(rebuilds, target, deadlineAtMs),
    readout: (targets, viewerId, relations, cold = {}) => readoutTargets(reads, targets, viewerId, relations, false, cold),
    read: (targets, cold = {}) => readCounts(reads, targets, cold),
    mirror: (values) => mirror(writes, values),
    initNew: (target, authorId) => initNew(writes, target, authorId),
  };
}
