// Loading targets Redis does not hold from PostgreSQL: many at once, from one
// snapshot. A read never waits for this (counters.ts answers it from PostgreSQL);
// writes load the target they change, and the warmer (warmer.ts) loads what reads
// asked for, a batch at a time.
//
// Each target is loaded under its rebuild lock, whose lease is the longest a load
// may take: a load that has not written by then gives up, and the counter hash,
// written last, is never written once the lock is not the loader's. An acquire
// whose answer was lost (a timeout: Redis may have taken the lock) is released by
// its token, and the next load of the target tries the same token, which owns the
// lock if Redis took it.
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { randomUUID } from "node:crypto";
import { LRUCache } from "lru-cache";
import { targetKey, zeroCounts, type CounterValue, type Target, type TargetKey } from "./model/index.js";
import type { CommittedSince, CounterStore, Holding, RebuildStore, SnapshotStore } from "./ports/index.js";

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

/** Of the lease, what a load keeps unused before it writes: writes sent before then land well within it. */
const leaseMarginMs = 5_000;

// eslint-disable-next-line max-lines-per-function -- the load's steps share the locks taken and the missing ids in one closure, each step a function of its own.
export function createTargetLoader(options: TargetLoaderOptions): TargetLoader {
  const { rebuildStore, snapshots, counterStore, lookup, onLoss, onSuspectEpisode } = options;
  const commitLagMs = options.commitLagMs ?? 3_000;
  const connectionLostAt = options.connectionLostAt ?? (() => Number.POSITIVE_INFINITY);
  const leaseMs = options.leaseMs ?? 15_000;
  const droppedWaitMs = options.droppedWaitMs ?? 3_000;
  const missing = new LRUCache<TargetKey, true>({ max: 100_000, ttl: options.missingTtlMs ?? 30_000 });
  // Tokens of acquires whose answer never came: Redis may hold the lock under them.
  const unanswered = new LRUCache<TargetKey, string>({ max: 10_000, ttl: leaseMs });
  const histories = { adopted: 0, reloaded: 0 };
  // The node histories suspect targets were found on, with when this process first found one.
  const historiesSeen = new LRUCache<string, number>({ max: 1_000 });

  /** Takes each target's lock; the tokens of those taken, null where another process holds it. */
  async function lockAll(targets: readonly Target[]): Promise<(string | null)[]> {
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

  /**
   * A target dropped with changes in flight is loaded once PostgreSQL holds the last of
   * them, or after `droppedWaitMs`: a snapshot without them would answer from an older
   * state until they are replayed. The replay still covers whatever arrives later.
   */
  async function awaitDroppedChanges(target: Target, dropped: bigint | null): Promise<void> {
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
    targets: readonly Target[],
    mark: string,
    epochs: readonly bigint[],
  ): Promise<{ complete: boolean[]; derived: CounterValue[] }> {
    let committed: CommittedSince[];
    try {
      committed = await snapshots.changesSince(targets, mark);
    } catch (error) {
      await Promise.allSettled(targets.map((target) => rebuildStore.drop(target)));
      throw error;
    }
    const replayed = await Promise.allSettled(targets.map((target, i) => replayInto(target, epochs[i] as bigint, committed[i])));
    const failed = replayed.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw failed.reason;
    const complete = replayed.map((r) => (r as PromiseFulfilledResult<boolean>).value);
    // Of the targets still held only: one a replay took out comes back whole.
    return { complete, derived: committed.flatMap((since, i) => (complete[i] ? since.derived : [])) };
  }

  async function replayInto(target: Target, intoEpoch: bigint, since: CommittedSince = { changes: [], views: [], derived: [] }): Promise<boolean> {
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

  /**
   * Resolves once the changes the relay published before a node's history changed have
   * had their time to commit in PostgreSQL: `commitLagMs` after the failover, which is
   * when this process's connection to Redis closed (or, had none closed since, when it
   * first found a target suspect on a node of that history, as after a slot's move). A
   * change the old primary acknowledged and the relay published, still in a queue or a
   * batch, would otherwise be missing from the comparison below, and the target adopted
   * without it.
   */
  async function historiesSettled(holdings: readonly Holding[]): Promise<void> {
    const now = performance.now();
    let until = now;
    for (const holding of holdings) {
      if (typeof holding !== "object") continue;
      let since = historiesSeen.get(holding.nodeHistory);
      if (since === undefined) {
        historiesSeen.set(holding.nodeHistory, (since = Math.min(now, connectionLostAt())));
        const checkAt = since + commitLagMs;
        if (onSuspectEpisode) setTimeout(() => onSuspectEpisode(checkAt - commitLagMs), Math.max(0, checkAt - now)).unref();
      }
      until = Math.max(until, since + commitLagMs);
    }
    if (until > now) await sleep(until - now);
  }

  /**
   * Whether each target is held, once those held from another replication history
   * (suspect: a failover, a restart or a slot's move brought them to their node) are
   * settled. A failover or an AOF loses a suffix of a target's changes, so PostgreSQL
   * holding nothing newer than the version the target last stamped means Redis lacks
   * nothing PostgreSQL has: the target is adopted as it is. Otherwise it lost changes
   * PostgreSQL holds (`onLoss`) and is dropped, to load from PostgreSQL.
   */
  async function settleSuspects(targets: readonly Target[], holdings: readonly Holding[]): Promise<boolean[]> {
    await historiesSettled(holdings);
    return Promise.all(
      targets.map(async (target, i) => {
        const holding = holdings[i];
        if (holding === undefined || typeof holding === "string") return holding === "held";
        const persisted = await snapshots.newestChange(target);
        if (persisted <= holding.suspectAt) {
          const adopted = await rebuildStore.adopt(target, holding.suspectAt);
          if (adopted) histories.adopted++;
          return adopted;
        }
        histories.reloaded++;
        onLoss?.(target, holding.suspectAt, persisted);
        await rebuildStore.dropSuspect(target);
        return false;
      }),
    );
  }

  /** Loads the locked targets from one snapshot; what became of each. */
  async function loadLocked(
    targets: readonly Target[],
    tokens: readonly string[],
    authors: readonly (bigint | null)[],
    dropped: readonly (bigint | null)[],
    startedAt: number,
  ): Promise<LoadOutcome[]> {
    await Promise.all(targets.map((target, i) => awaitDroppedChanges(target, dropped[i] ?? null)));
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
    const outcomes: LoadOutcome[] = written.map((w) =>
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
      fresh,
      mark,
      targets.flatMap((_, i) => (outcomes[i] === "loaded" ? [(found[i] as (typeof found)[number]).epoch] : [])),
    );
    if (derived.length > 0) await counterStore.mirror(derived);
    if (failedWrite) throw failedWrite.reason;
    let j = 0;
    return outcomes.map((outcome) => (outcome === "loaded" ? (complete[j++] ? "loaded" : "dropped") : outcome));
  }

  return {
    async load(asked) {
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
      const held = await settleSuspects(existing, await rebuildStore.held(existing));
      const unheld = existing.filter((t, i) => {
        if (held[i]) outcomes.set(targetKey(t), "held");
        return !held[i];
      });
      // In one round trip: the locks, then (under them: the previous holder may have just finished)
      // whether Redis holds each target, and what a drop of each left.
      const claiming = lockAll(unheld);
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
        const heldNow = await settleSuspects(unheld, holdings);
        const droppedNow = holdings.some((h) => typeof h !== "string") ? await rebuildStore.droppedVersions(unheld) : dropped;
        const loading = unheld.flatMap((t, i) => {
          if (!tokens[i]) return [];
          if (heldNow[i]) outcomes.set(targetKey(t), "held");
          return heldNow[i] ? [] : [{ target: t, token: tokens[i], dropped: droppedNow[i] ?? null }];
        });
        if (loading.length > 0) {
          const loaded = await loadLocked(
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
    },
    created(target) {
      missing.delete(targetKey(target));
    },
    histories: () => ({ ...histories }),
  };
}
