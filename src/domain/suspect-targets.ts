// Targets a load finds held from another replication history (suspect: a failover,
// a restart or a slot's move brought them to their node): adopted as they are when
// they lack nothing PostgreSQL holds, dropped to load again otherwise.
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import type { LRUCache } from "lru-cache";
import type { Target } from "./model/index.js";
import type { Holding, RebuildStore, SnapshotStore } from "./ports/index.js";

/** What settling suspects takes, and what the process's loads have found of histories so far. */
export interface SuspectTargets {
  readonly rebuildStore: Pick<RebuildStore, "adopt" | "dropSuspect">;
  readonly snapshots: Pick<SnapshotStore, "newestChange">;
  readonly onLoss?: (target: Target, redisVersion: bigint, postgresVersion: bigint) => void;
  readonly onSuspectEpisode?: (atMs: number) => void;
  /** How long a change the relay published takes at most to commit in PostgreSQL. */
  readonly commitLagMs: number;
  /** When this process's connection to Redis last closed (performance.now()). */
  readonly connectionLostAt: () => number;
  /** Targets found held from another replication history since start: kept whole, or loaded again. */
  readonly histories: { adopted: number; reloaded: number };
  // The node histories suspect targets were found on, with when this process first found one.
  readonly historiesSeen: LRUCache<string, number>;
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
async function historiesSettled(
  { historiesSeen, connectionLostAt, commitLagMs, onSuspectEpisode }: SuspectTargets,
  holdings: readonly Holding[],
): Promise<void> {
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
export async function settleSuspects(suspects: SuspectTargets, targets: readonly Target[], holdings: readonly Holding[]): Promise<boolean[]> {
  const { snapshots, rebuildStore, histories, onLoss } = suspects;
  await historiesSettled(suspects, holdings);
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
