// Counts of targets: read from Redis, and rebuilt there from PostgreSQL when
// Redis does not hold a target (a new Redis, a flush, an evicted cold target).
import { setTimeout as sleep } from "node:timers/promises";
import { LRUCache } from "lru-cache";
import { DomainError, ErrorCode } from "../errors.js";
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
import type { CounterStore, PersistedCounts, RebuildStore, SnapshotStore } from "./ports/index.js";
import { createRebuildSlots, type RebuildSlots } from "./rebuild-slots.js";

/** What PostgreSQL knows of a target: whether it exists and who wrote it. */
export type TargetLookup = (target: Target) => Promise<{ authorId: bigint | null } | null>;

/** Whether Redis may take one more target now; throws the coded refusal when it is too near its memory limit. */
export type LoadAdmission = () => Promise<void>;

/** What a read of targets Redis does not hold loads: their counters rows alone, or the whole target (rebuild). */
export type ColdLoad = "counts" | "rebuild";

/** What a read may spend on targets Redis does not hold: its request's deadline and budget. */
export interface ColdReads {
  /** When the request answers whatever happens, in milliseconds since the epoch: no load waits past it. */
  readonly deadlineAtMs?: number;
  /**
   * Pays for loading `targets` targets from PostgreSQL before any is loaded; throws
   * (RATE_LIMITED) when the caller's budget is spent, and nothing is loaded.
   */
  readonly pay?: (load: ColdLoad, targets: number) => Promise<void>;
}

export interface CounterService {
  /**
   * Counts of existing targets as Redis holds them now, in order, never from counts
   * kept in process memory: for a reader that heard of a change (live counts). One
   * Redis round trip when Redis holds them all.
   */
  read(targets: readonly Target[]): Promise<Counts[]>;
  /**
   * What a feed shows of each target, in order: its counts and the viewer's
   * memberships of `relations` (every relation of the type unless given; none
   * for a null viewer). Targets Redis does not hold are rebuilt from PostgreSQL
   * first; one that does not exist reads as all zeros.
   */
  view(targets: readonly Target[], viewerId: bigint | null, relations?: readonly Relation[], cold?: ColdReads): Promise<TargetView[]>;
  /**
   * Puts a target back into Redis from PostgreSQL (counts and membership), one
   * rebuild at a time across processes; false when the target does not exist.
   * Waits for one of the process's rebuild slots until `deadlineAtMs` at most
   * (SERVICE_UNAVAILABLE past it), and is refused while Redis is near its memory limit.
   */
  rebuild(target: Target, deadlineAtMs?: number): Promise<boolean>;
  /**
   * Mirrors into Redis derived counters as PostgreSQL committed them (in the same
   * transaction as their cause). A target Redis does not hold is left alone: its
   * rebuild reads the value from PostgreSQL.
   */
  mirror(values: readonly CounterValue[]): Promise<void>;
  /** Marks a just-created target known to Redis with all its counters at zero. */
  initNew(target: Target, authorId?: bigint): Promise<void>;
}

export interface CounterServiceOptions {
  readonly counterStore: CounterStore;
  readonly rebuildStore: RebuildStore;
  readonly snapshots: SnapshotStore;
  readonly lookup: TargetLookup;
  /** How long an id found missing in PostgreSQL is answered as missing without asking again. */
  readonly missingTtlMs?: number;
  /** How long a rebuild may hold its lock before another process may take over. */
  readonly rebuildLockMs?: number;
  /** How long a request waits for another process's rebuild of the same target. */
  readonly rebuildWaitMs?: number;
  /** How long the rebuild of a dropped target waits for its changes in flight to reach PostgreSQL. */
  readonly droppedWaitMs?: number;
  /** The process's rebuild slots, shared by reads, view flushes and writes; 4 at once and 256 waiting unless given. */
  readonly slots?: RebuildSlots;
  /**
   * Where an anonymous read finds the counts of targets Redis does not hold, without
   * loading them; without it such targets are rebuilt as for a viewer.
   */
  readonly persistedCounts?: PersistedCounts;
  /** Asked before every rebuild: Redis's memory policy (memory-policy.ts). Without it, every rebuild is admitted. */
  readonly admitLoad?: LoadAdmission;
}

/** A view's memberships when the viewer is a member of nothing. */
export function noMemberships(type: TargetType): TargetView["viewerIn"] {
  return Object.fromEntries(relationsOf(type).map((relation) => [relation, false]));
}

/** Rebuilds a read tries before it gives up on a target that keeps leaving Redis. */
export const rebuildRounds = 3;

/** Another process's rebuild of the target did not finish in time: nothing is wrong, only slow (SERVICE_UNAVAILABLE). */
export class RebuildTimeoutError extends DomainError {
  constructor(target: Target, waitedMs: number) {
    super(ErrorCode.SERVICE_UNAVAILABLE, `${target.type} ${target.id} was still being loaded from PostgreSQL after ${waitedMs} ms; retry shortly.`);
  }
}

// eslint-disable-next-line max-lines-per-function -- a service's methods share its stores and rebuild slots in one closure; each method is short.
export function createCounterService(options: CounterServiceOptions): CounterService {
  const { counterStore, rebuildStore, snapshots, lookup } = options;
  const lockMs = options.rebuildLockMs ?? 120_000;
  const waitMs = options.rebuildWaitMs ?? 10_000;
  const droppedWaitMs = options.droppedWaitMs ?? 3_000;
  const missing = new LRUCache<TargetKey, true>({ max: 100_000, ttl: options.missingTtlMs ?? 30_000 });
  const rebuilding = new Map<TargetKey, Promise<boolean>>();
  const slots = options.slots ?? createRebuildSlots({ atOnce: 4, maxWaiting: 256 });
  const { persistedCounts, admitLoad } = options;

  const held = async (target: Target) => (await counterStore.read([target]))[0] !== null;

  /**
   * A target dropped with changes in flight (rebuildStore.drop) is rebuilt once
   * PostgreSQL holds the last of them, or after `droppedWaitMs`: a snapshot without
   * them would answer from an older state until they are replayed. Waiting is the
   * rarer cost; the replay still covers whatever arrives later.
   */
  async function awaitDroppedChanges(target: Target): Promise<void> {
    const dropped = await rebuildStore.droppedVersion(target);
    if (dropped === null) return;
    const deadline = Date.now() + droppedWaitMs;
    while ((await snapshots.newestVersion(target)) < dropped && Date.now() < deadline) await sleep(50);
  }

  /** Whether every change committed after the snapshot `mark` is now in Redis. */
  async function replayCommittedSince(target: Target, mark: string, intoEpoch: bigint): Promise<boolean> {
    const since = await snapshots.changesSince(target, mark);
    for (const change of since.changes) {
      if ((await rebuildStore.replay({ target, ...change, intoEpoch })) === "tooLate") return false;
    }
    for (const views of since.views) {
      if ((await rebuildStore.replayViews({ target, ...views, intoEpoch })) === "tooLate") return false;
    }
    return true;
  }

  async function rebuildOnce(target: Target, deadlineAtMs: number): Promise<boolean> {
    const key = targetKey(target);
    if (missing.has(key)) return false;
    const found = await lookup(target);
    if (!found) {
      missing.set(key, true);
      return false;
    }
    const started = Date.now();
    for (;;) {
      if (await held(target)) return true;
      const token = await rebuildStore.lock(target, lockMs);
      if (token) {
        try {
          // Checked again under the lock: the previous holder may have just finished.
          if (await held(target)) return true;
          await awaitDroppedChanges(target);
          const snapshot = await snapshots.read(target);
          await rebuildStore.write(target, { ...snapshot, counts: { ...zeroCounts(target.type), ...snapshot.counts } }, found.authorId);
          // Changes committed between the snapshot and the hash appearing were not replayed by
          // the consumer (it found no rebuilt hash): bring them in now. Repeats are harmless.
          // One that cannot be brought in leaves the target incomplete: it goes, and is rebuilt.
          let complete = false;
          try {
            complete = await replayCommittedSince(target, snapshot.mark, snapshot.epoch);
          } finally {
            if (!complete) await rebuildStore.drop(target);
          }
          if (complete) {
            // Derived counters mirrored between the snapshot and the hash appearing found no hash and were left:
            // mirror them as they stand now (a sequence number keeps an older value from winning).
            await counterStore.mirror(await snapshots.derived(target));
            return true;
          }
        } finally {
          await rebuildStore.unlock(target, token);
        }
      }
      // Another process is rebuilding this target: wait for its counter hash to appear.
      if (Date.now() - started > waitMs || Date.now() >= deadlineAtMs) throw new RebuildTimeoutError(target, Date.now() - started);
      await sleep(20);
    }
  }

  const rebuild = (target: Target, deadlineAtMs = Date.now() + waitMs): Promise<boolean> => {
    const key = targetKey(target);
    // Concurrent requests in this process share one rebuild, and the first one's deadline.
    let pending = rebuilding.get(key);
    if (!pending) {
      const admitted = admitLoad ? admitLoad() : Promise.resolve();
      pending = admitted.then(() => slots.run(() => rebuildOnce(target, deadlineAtMs), deadlineAtMs)).finally(() => rebuilding.delete(key));
      rebuilding.set(key, pending);
    }
    return pending;
  };

  /**
   * The counts of targets Redis does not hold, for a reader who needs no
   * membership: PostgreSQL's counters rows, read without loading the targets, so
   * reading cold targets neither fills Redis nor holds a connection for a snapshot.
   * Exact as a rebuild made at the same moment would be: both show what PostgreSQL
   * committed. Redis is asked again afterwards, so a target loaded meanwhile (a
   * like made it change) is answered from Redis, never older than a change that
   * was acknowledged before this read; and a target dropped with changes still on
   * their way to PostgreSQL (rebuildStore.drop) stays null, to be rebuilt, which
   * waits for them. Nulls where the caller must rebuild.
   */
  async function persistedViews(targets: readonly Target[], asked: readonly Relation[] | undefined, exact: boolean): Promise<(TargetView | null)[]> {
    const persisted = await (persistedCounts as PersistedCounts).read(targets);
    const [again, dropped] = await Promise.all([viewHeld(targets, null, asked, exact), Promise.all(targets.map((t) => rebuildStore.droppedVersion(t)))]);
    return targets.map((target, j) => {
      const held = again[j];
      if (held) return held;
      if (dropped[j] !== null) return null;
      return { counts: { ...zeroCounts(target.type), ...persisted[j] }, viewerIn: noMemberships(target.type) };
    });
  }

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
    // A copy: callers fill in what they rebuild.
    return [...(await pending)];
  };

  /** One store read per type (all in the same round trip), in the order given. */
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

  async function view(
    targets: readonly Target[],
    viewerId: bigint | null,
    asked?: readonly Relation[],
    exact = false,
    cold: ColdReads = {},
  ): Promise<TargetView[]> {
    const views = await viewHeld(targets, viewerId, asked, exact);
    // Live counts' exact reads load the target: its changes are announced from Redis.
    if (viewerId === null && !exact && persistedCounts && views.includes(null)) {
      const absent = targets.flatMap((_, i) => (views[i] === null ? [i] : []));
      await cold.pay?.("counts", absent.length);
      const found = await persistedViews(
        absent.map((i) => targets[i] as Target),
        asked,
        exact,
      );
      absent.forEach((i, j) => (views[i] = found[j] ?? null));
    }
    // A target dropped again right after its rebuild (a late replay, a reconcile repair) is rebuilt once more.
    for (let round = 0; round < rebuildRounds; round++) {
      const absent = targets.flatMap((_, i) => (views[i] === null ? [i] : []));
      if (absent.length === 0) break;
      await cold.pay?.("rebuild", absent.length);
      const exists = await Promise.all(absent.map((i) => rebuild(targets[i] as Target, cold.deadlineAtMs)));
      const existing = absent.filter((_, j) => exists[j]);
      if (existing.length === 0) break;
      const reread = await viewHeld(
        existing.map((i) => targets[i] as Target),
        viewerId,
        asked,
        exact,
      );
      existing.forEach((i, j) => (views[i] = reread[j] ?? null));
    }
    // A target that does not exist reads as all zeros.
    return views.map((v, i) => v ?? { counts: zeroCounts((targets[i] as Target).type), viewerIn: noMemberships((targets[i] as Target).type) });
  }

  return {
    rebuild,
    view: (targets, viewerId, relations, cold) => view(targets, viewerId, relations, false, cold),
    async read(targets) {
      return (await view(targets, null, undefined, true)).map((v) => v.counts);
    },
    async mirror(values) {
      if (values.length > 0) await counterStore.mirror(values);
    },
    async initNew(target, authorId) {
      missing.delete(targetKey(target));
      await counterStore.init(target, { [counterNames[target.type][0]]: 0 }, authorId);
    },
  };
}
