// Loading targets Redis does not hold from PostgreSQL: many at once, from one
// snapshot. A read never waits for this (counter-reads.ts answers it from PostgreSQL);
// writes load the target they change, and the warmer (warmer.ts) loads what reads
// asked for, a batch at a time. What a load does under the locks is snapshot-loads.ts's;
// targets held from another replication history are suspect-targets.ts's.
//
// Each target is loaded under its rebuild lock, whose lease is the longest a load
// may take: a load that has not written by then gives up, and the counter hash,
// written last, is never written once the lock is not the loader's. An acquire
// whose answer was lost (a timeout: Redis may have taken the lock) is released by
// its token, and the next load of the target tries the same token, which owns the
// lock if Redis took it.
import { randomUUID } from "node:crypto";
import { LRUCache } from "lru-cache";
import { targetKey, type Target, type TargetKey } from "./model/index.js";
import type { CounterStore, RebuildStore, SnapshotStore } from "./ports/index.js";
import { loadLocked, type SnapshotLoads } from "./snapshot-loads.js";
import { settleSuspects, type SuspectTargets } from "./suspect-targets.js";

/** Whether Redis may take one more target now; throws the coded refusal when it is too near its memory limit. */
export type LoadAdmission = () => Promise<void>;

/** What PostgreSQL knows of targets: per target in order, whether it exists and who wrote it. */
export type TargetLookup = (targets: readonly Target[]) => Promise<({ authorId: bigint | null } | null)[]>;

/**
 * What became of a target a load was asked for: loaded now; held already (or loaded by
 * another process meanwhile); missing from PostgreSQL; busy (another process holds its
 * lock and is loading it); dropped again right after (a late change could not be brought
 * in), to be loaded once more; or abandoned (its load took longer than its lease).
 */
export type LoadOutcome = "loaded" | "held" | "missing" | "busy" | "dropped" | "abandoned";

export interface TargetLoader {
  /**
   * Loads the targets Redis does not hold from one PostgreSQL snapshot; answers what
   * became of each, in order. Throws when Redis or PostgreSQL fails; the locks taken are
   * released first. Never waits for another process's load of a target.
   */
  load(targets: readonly Target[]): Promise<LoadOutcome[]>;
  /** A target just created exists, whatever an earlier load found. */
  created(target: Target): void;
  /** Targets found held from another replication history since start: kept whole (adopted), or lacking changes and loaded again. */
  histories(): { readonly adopted: number; readonly reloaded: number };
}

export interface TargetLoaderOptions {
  readonly rebuildStore: RebuildStore;
  readonly snapshots: SnapshotStore;
  readonly counterStore: Pick<CounterStore, "mirror">;
  readonly lookup: TargetLookup;
  /** How long an id found missing in PostgreSQL is answered as missing without asking again; default 30 s. */
  readonly missingTtlMs?: number;
  /** The rebuild lock's lease: the longest a load may take; it writes nothing past `leaseMs` less a margin. Default 15 s. */
  readonly leaseMs?: number;
  /** How long a load of a dropped target waits for its changes in flight to reach PostgreSQL; default 3 s. */
  readonly droppedWaitMs?: number;
  /**
   * Told of a target its node held from another replication history that lacks changes
   * PostgreSQL holds (a failover or a restart took them back): the version Redis last
   * stamped and PostgreSQL's newest. It is loaded again from PostgreSQL.
   */
  readonly onLoss?: (target: Target, redisVersion: bigint, postgresVersion: bigint) => void;
  /**
   * Told, `commitLagMs` after the failover, that this process found a target suspect on a
   * node of a new history (a failover, a restart) that began at `atMs` (performance.now()):
   * what it acknowledged before may be lost.
   */
  readonly onSuspectEpisode?: (atMs: number) => void;
  /**
   * How long a change the relay published takes at most to commit in PostgreSQL (the
   * relay's and the persist batch's lingers, and a margin); default 3 s.
   */
  readonly commitLagMs?: number;
  /** When this process's connection to Redis last closed (performance.now()), as a failover closes it. */
  readonly connectionLostAt?: () => number;
}

/** What every load of the process takes, and what its loads share. */
interface TargetLoads extends SnapshotLoads, SuspectTargets {
  readonly rebuildStore: RebuildStore;
  readonly snapshots: SnapshotStore;
  readonly lookup: TargetLookup;
  /** Ids found missing in PostgreSQL lately: answered as missing without asking again. */
  readonly missing: LRUCache<TargetKey, true>;
  // Tokens of acquires whose answer never came: Redis may hold the lock under them.
  readonly unanswered: LRUCache<TargetKey, string>;
}

/** Takes each target's lock; the tokens of those taken, null where another process holds it. */
async function lockAll({ rebuildStore, unanswered, leaseMs }: TargetLoads, targets: readonly Target[]): Promise<(string | null)[]> {
  // Taken out of `unanswered` as it is tried: two loads of this process never share a token (both would own the lock).
  const tokens = targets.map((t) => {
    const token = unanswered.get(targetKey(t));
    unanswered.delete(targetKey(t));
    return token ?? randomUUID();
  });
  const settled = await Promise.allSettled(targets.map((t, i) => rebuildStore.lock(t, leaseMs, tokens[i])));
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (!failed) return settled.map((s) => (s as PromiseFulfilledResult<string | null>).value);
  // Released as soon as possible, by token; a lock taken after that (the acquire landing late) is the next load's.
  targets.forEach((t, i) => {
    const outcome = settled[i] as PromiseSettledResult<string | null>;
    if (outcome.status === "rejected") unanswered.set(targetKey(t), tokens[i]);
    const token = outcome.status === "fulfilled" ? outcome.value : (tokens[i] as string);
    if (token) rebuildStore.unlock(t, token).catch(() => {});
  });
  throw failed.reason;
}

/** TargetLoader.load. */
async function load(loads: TargetLoads, asked: readonly Target[]): Promise<LoadOutcome[]> {
  const { rebuildStore, lookup, missing } = loads;
  const startedAt = Date.now();
  const outcomes = new Map<TargetKey, LoadOutcome>();
  const distinct = [...new Map(asked.map((t) => [targetKey(t), t])).values()].filter((t) => !missing.has(targetKey(t)));
  const authors = await lookup(distinct);
  const existing = distinct.filter((t, i) => {
    if (authors[i]) return true;
    missing.set(targetKey(t), true);
    return false;
  });
  const authorOf = new Map(existing.map((t) => [targetKey(t), authors[distinct.indexOf(t)]?.authorId ?? null]));
  const held = await settleSuspects(loads, existing, await rebuildStore.held(existing));
  const unheld = existing.filter((t, i) => {
    if (held[i]) outcomes.set(targetKey(t), "held");
    return !held[i];
  });
  // In one round trip: the locks, then (under them: the previous holder may have just finished)
  // whether Redis holds each target, and what a drop of each left.
  const claiming = lockAll(loads, unheld);
  const underLocks = Promise.all([rebuildStore.held(unheld), rebuildStore.droppedVersions(unheld)]);
  underLocks.catch(() => {});
  const tokens = await claiming;
  const locked = unheld.filter((t, i) => {
    if (!tokens[i]) outcomes.set(targetKey(t), "busy");
    return tokens[i] !== null;
  });
  const lockedTokens = tokens.filter((token): token is string => token !== null);
  try {
    const [holdings, dropped] = await underLocks;
    // Suspect again under the lock (a failover meanwhile): settled first, a drop's version read after.
    const heldNow = await settleSuspects(loads, unheld, holdings);
    const droppedNow = holdings.some((h) => typeof h !== "string") ? await rebuildStore.droppedVersions(unheld) : dropped;
    const loading = unheld.flatMap((t, i) => {
      if (!tokens[i]) return [];
      if (heldNow[i]) outcomes.set(targetKey(t), "held");
      return heldNow[i] ? [] : [{ target: t, token: tokens[i], dropped: droppedNow[i] ?? null }];
    });
    if (loading.length > 0) {
      const loaded = await loadLocked(
        loads,
        loading.map((l) => l.target),
        loading.map((l) => l.token),
        loading.map((l) => authorOf.get(targetKey(l.target)) ?? null),
        loading.map((l) => l.dropped),
        startedAt,
      );
      loading.forEach((l, i) => outcomes.set(targetKey(l.target), loaded[i] as LoadOutcome));
    }
  } finally {
    await rebuildStore.unlockMany(locked, lockedTokens).catch(() => {});
  }
  return asked.map((t) => outcomes.get(targetKey(t)) ?? "missing");
}

export function createTargetLoader(options: TargetLoaderOptions): TargetLoader {
  const { rebuildStore, snapshots, counterStore, lookup, onLoss, onSuspectEpisode } = options;
  const leaseMs = options.leaseMs ?? 15_000;
  const loads: TargetLoads = {
    rebuildStore,
    snapshots,
    counterStore,
    lookup,
    onLoss,
    onSuspectEpisode,
    commitLagMs: options.commitLagMs ?? 3_000,
    connectionLostAt: options.connectionLostAt ?? (() => Number.POSITIVE_INFINITY),
    leaseMs,
    droppedWaitMs: options.droppedWaitMs ?? 3_000,
    missing: new LRUCache<TargetKey, true>({ max: 100_000, ttl: options.missingTtlMs ?? 30_000 }),
    unanswered: new LRUCache<TargetKey, string>({ max: 10_000, ttl: leaseMs }),
    histories: { adopted: 0, reloaded: 0 },
    historiesSeen: new LRUCache<string, number>({ max: 1_000 }),
  };
  return {
    load: (asked) => load(loads, asked),
    created(target) {
      loads.missing.delete(targetKey(target));
    },
    histories: () => ({ ...loads.histories }),
  };
}
