// Persisting changes: fold a batch to the newest change per (target, relation,
// user) and apply it; the store skips anything PostgreSQL already has a newer
// version of, and adds views by what their totals add.
//
// A target rebuilt into Redis from PostgreSQL could not see changes that were
// still on their way (in RabbitMQ, or in a batch) at that moment. When such a
// change reaches PostgreSQL it is replayed into the rebuilt target, so Redis and
// PostgreSQL end in agreement without losing it or counting it twice. A rebuild
// starts a new epoch, so "made before the rebuild" is a comparison of versions.
//
// What the target's slot cannot hold moves here, after the commit:
// - Credits (an author's likes and collects received, a follower's following)
//   live in another user's slot. Redis takes them as PostgreSQL committed them,
//   absolute values with a sequence number, for everyone the batch's changes
//   credit whether or not this delivery moved them: a delivery that failed after
//   the commit (the worker died) leaves them to its redelivery, which finds the
//   changes applied and mirrors the same values again.
// - A user's list of liked or collected posts lives in the user's slot: it takes
//   the committed changes here, every list of the batch in one call per node;
//   each change applies only when newer than what the list knows
//   (apply-list-changes.lua), so batches committing in either order end right.
// - The hot ranking (src/domain/rankings.ts) lives in a slot of its own: it takes the
//   like counts per time bucket and in all of every post the batch's likes name, as
//   PostgreSQL committed them, absolute values with sequence numbers.
// - A user's member index (a standalone Redis's) is held from expiring while it holds a
//   like PostgreSQL lacks; the batch's changes release what they commit.
import {
  listedRelations,
  targetKey,
  type AppliedChanges,
  type Change,
  type CommittedChange,
  type CommittedViews,
  type ListedRelation,
  type RelationChange,
  type Target,
  type ViewChange,
} from "./model/index.js";
import type { CounterStore, ListChange, ListStore, MemberIndexHolds, RankingStore, RebuildStore, PersistStore, SnapshotStore } from "./ports/index.js";

/**
 * The newest change per (target, relation, user): what a batch must apply. Older
 * changes of the same pair are superseded whatever order they arrived in. Views
 * are kept as they are: the store adds each epoch's highest total once.
 */
export function coalesce(changes: readonly Change[]): Change[] {
  const newest = new Map<string, RelationChange>();
  const views: ViewChange[] = [];
  for (const change of changes) {
    if (change.kind === "views") {
      views.push(change);
      continue;
    }
    const key = `${change.target.type}:${change.target.id}:${change.relation}:${change.userId}`;
    const kept = newest.get(key);
    if (!kept || change.version > kept.version) newest.set(key, change);
  }
  return [...newest.values(), ...views];
}

/**
 * PostgreSQL committed the batch but Redis, unreachable or stalled, did not take
 * what follows it (credits, replays, lists). The changes are not at fault: the
 * batch is retried as it is, and finds them applied and does the rest. Any other
 * failure there (a script refusing what it was given) is the batch's own, and is
 * thrown as it is.
 */
export class RedisFollowUpError extends Error {
  override readonly name = "RedisFollowUpError";
  constructor(cause: unknown) {
    super(`PostgreSQL committed the batch, but Redis did not take what follows it: ${(cause as Error)?.message ?? String(cause)}`, { cause });
  }
}

export interface ChangePersistence {
  persist(changes: readonly Change[]): Promise<AppliedChanges>;
}

export interface ChangePersistenceDeps {
  readonly persistStore: PersistStore;
  readonly rebuilds: RebuildStore;
  /** Tells which commits a rebuild's snapshot saw. */
  readonly snapshots: Pick<SnapshotStore, "sawCommit">;
  readonly counters: CounterStore;
  readonly lists: ListStore;
  /** The hot ranking in Redis; without it, batches leave the ranking alone. */
  readonly rankings?: Pick<RankingStore, "mirror">;
  /** Member indexes held for likes not yet persisted, where Redis keeps them (not on a cluster). */
  readonly memberIndexes?: MemberIndexHolds;
  /** Runs right after PostgreSQL committed a batch, before Redis hears of it (tests inject crashes here). */
  readonly afterDatabaseCommit?: (applied: AppliedChanges) => Promise<void>;
  /** Whether an error says Redis did not answer, rather than refused a command. */
  readonly isRedisUnavailable: (error: unknown) => boolean;
  /**
   * Told of a target Redis holds that lacks a change PostgreSQL just committed (a failover
   * or a restart took it back): the version Redis last stamped and the change's. It is dropped.
   */
  readonly onRedisBehind?: (target: Target, redisVersion: bigint, postgresVersion: bigint) => void;
}

const isListed = (change: RelationChange): change is RelationChange & { relation: ListedRelation } =>
  (listedRelations as readonly string[]).includes(change.relation) && change.target.type === "post";

export function createChangePersistence(deps: ChangePersistenceDeps): ChangePersistence {
  const { persistStore, rebuilds, snapshots, counters, lists, rankings, memberIndexes, afterDatabaseCommit, isRedisUnavailable, onRedisBehind } = deps;
  /**
   * Replays into rebuilt targets the committed changes and views their rebuild's
   * snapshot did not see. Given every change that is its pair's newest in
   * PostgreSQL, not only those this delivery applied, so a redelivery after a
   * failure here replays too.
   */
  async function replayIntoRebuilt(committed: readonly CommittedChange[], views: readonly CommittedViews[]): Promise<void> {
    if (committed.length === 0 && views.length === 0) return;
    const targets = [...new Map([...committed.map(({ change }) => change.target), ...views.map((v) => v.target)].map((t) => [targetKey(t), t])).values()];
    const held = new Map((await rebuilds.rebuilds(targets)).map((h, i) => [targetKey(targets[i]!), h]));
    const late = committed.flatMap(({ change, txid }) => {
      const rebuilt = held.get(targetKey(change.target))?.rebuild;
      return rebuilt && change.version < rebuilt.epochStart && !snapshots.sawCommit(rebuilt.mark, txid) ? [{ change, intoEpoch: rebuilt.epoch }] : [];
    });
    const lateViews = views.flatMap((v) => {
      const rebuilt = held.get(targetKey(v.target))?.rebuild;
      return rebuilt && v.epoch < rebuilt.epoch && !snapshots.sawCommit(rebuilt.mark, v.txid) ? [{ ...v, intoEpoch: rebuilt.epoch }] : [];
    });
    // Redis stamps every change before PostgreSQL sees it, so a committed change newer than
    // what the target last stamped is one Redis lost (a failover, a restart from its AOF,
    // after the target was adopted): it goes, to load again from PostgreSQL, which holds it.
    const behind = new Map(
      committed.flatMap(({ change }) => {
        const redis = held.get(targetKey(change.target));
        return redis && change.version > redis.version
          ? [[targetKey(change.target), { target: change.target, redis: redis.version, postgres: change.version }]]
          : [];
      }),
    );
    for (const lost of behind.values()) onRedisBehind?.(lost.target, lost.redis, lost.postgres);
    const outcomes = await Promise.all([
      ...late.map(({ change: c, intoEpoch }) =>
        rebuilds
          .replay({ relation: c.relation, target: c.target, userId: c.userId, member: c.member, version: c.version, intoEpoch })
          .then((o) => ({ o, target: c.target })),
      ),
      ...lateViews.map((v) =>
        rebuilds.replayViews({ target: v.target, epoch: v.epoch, total: v.total, intoEpoch: v.intoEpoch }).then((o) => ({ o, target: v.target })),
      ),
    ]);
    // Too late to tell whether Redis superseded it: take the target out, and the next
    // read rebuilds it from PostgreSQL, which holds the change (and replays what is in flight).
    const stale = new Map([
      ...outcomes.filter(({ o }) => o === "tooLate").map(({ target }) => [targetKey(target), target] as const),
      ...[...behind].map(([key, lost]) => [key, lost.target] as const),
    ]);
    await Promise.all([...stale.values()].map((target) => rebuilds.drop(target)));
  }

  /** Writes committed likes and collects of posts into their users' lists. */
  async function settleLists(committed: readonly CommittedChange[]): Promise<void> {
    const byList = new Map<string, { relation: ListedRelation; userId: bigint; changes: ListChange[] }>();
    for (const { change } of committed) {
      if (!isListed(change)) continue;
      const key = `${change.relation}:${change.userId}`;
      let list = byList.get(key);
      if (!list) byList.set(key, (list = { relation: change.relation, userId: change.userId, changes: [] }));
      list.changes.push({ targetId: change.target.id, member: change.member, version: change.version, at: change.at });
    }
    await lists.applyCommitted([...byList.values()]);
  }

  return {
    async persist(changes) {
      const coalesced = coalesce(changes);
      const applied = await persistStore.apply(coalesced);
      await afterDatabaseCommit?.(applied);
      // Any failure below fails the batch: its redelivery finds the changes applied and does all of it again.
      const failures = (
        await Promise.allSettled([
          applied.credits.length ? counters.mirror(applied.credits) : undefined,
          replayIntoRebuilt(applied.current, applied.views),
          settleLists(applied.current),
          rankings && (applied.ranked.buckets.length > 0 || applied.ranked.totals.length > 0) ? rankings.mirror(applied.ranked, Date.now()) : undefined,
          // Every change of the batch, applied or superseded in PostgreSQL: either way its like is no longer only in Redis.
          memberIndexes?.settle(
            coalesced.flatMap((c) =>
              c.kind === "relation" ? [{ relation: c.relation, targetType: c.target.type, targetId: c.target.id, userId: c.userId, version: c.version }] : [],
            ),
          ),
        ])
      ).flatMap((outcome) => (outcome.status === "rejected" ? [outcome.reason as unknown] : []));
      const refused = failures.find((error) => !isRedisUnavailable(error));
      if (refused !== undefined) throw refused instanceof Error ? refused : new Error("a Redis step after the commit failed", { cause: refused });
      if (failures.length > 0) throw new RedisFollowUpError(failures[0]);
      return applied;
    },
  };
}
