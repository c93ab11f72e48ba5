// Persisting like changes: fold a batch to the newest change per (target, user)
// and apply it; the store skips anything PostgreSQL already has a newer version of.
//
// A target rebuilt into Redis from PostgreSQL could not see changes that were
// still on their way (in RabbitMQ, or in a batch) at that moment. When such a
// change reaches PostgreSQL it is replayed into the rebuilt target, so Redis and
// PostgreSQL end in agreement without losing it or counting it twice. A rebuild
// starts a new epoch, so "made before the rebuild" is a comparison of versions.
//
// Authors' likesReceived lives in another slot than the liked target, so no
// like script can move it. It moves here instead, in Redis by the same deltas
// just committed to PostgreSQL (rows really inserted or deleted): both stores
// derive it from one source, about a second after the like.
import { targetKey, type AppliedLikes, type CommittedChange, type LikeChange } from "./model.js";
import type { CounterStore, LikeHistoryStore, RebuildStore, SnapshotStore } from "./ports.js";

/**
 * The newest change per (target, user): what a batch must apply. Older changes
 * of the same pair are superseded whatever order they arrived in.
 */
export function coalesce(changes: readonly LikeChange[]): LikeChange[] {
  const newest = new Map<string, LikeChange>();
  for (const change of changes) {
    const key = `${change.target.type}:${change.target.id}:${change.userId}`;
    const kept = newest.get(key);
    if (!kept || change.version > kept.version) newest.set(key, change);
  }
  return [...newest.values()];
}

export interface LikePersistence {
  persist(changes: readonly LikeChange[]): Promise<AppliedLikes>;
}

export interface LikePersistenceDeps {
  readonly likeHistory: LikeHistoryStore;
  readonly rebuilds: RebuildStore;
  /** Tells which commits a rebuild's snapshot saw. */
  readonly snapshots: Pick<SnapshotStore, "sawCommit">;
  readonly counters: CounterStore;
  /** Told when crediting an author in Redis failed (a replay that fails fails the batch instead). */
  readonly onRedisFailure: (error: unknown) => void;
}

export function createLikePersistence({ likeHistory, rebuilds, snapshots, counters, onRedisFailure }: LikePersistenceDeps): LikePersistence {
  /**
   * Replays into rebuilt targets the committed changes their rebuild's snapshot did
   * not see. Given every change that is its pair's newest in PostgreSQL, not only
   * those this delivery applied, so a redelivery after a failure here replays too.
   */
  async function replayIntoRebuilt(committed: readonly CommittedChange[]): Promise<void> {
    if (committed.length === 0) return;
    const targets = [...new Map(committed.map(({ change }) => [targetKey(change.target), change.target])).values()];
    const marks = new Map((await rebuilds.rebuilds(targets)).map((mark, i) => [targetKey(targets[i]!), mark]));
    const late = committed.flatMap(({ change, txid }) => {
      const rebuilt = marks.get(targetKey(change.target));
      return rebuilt && change.version < rebuilt.epochStart && !snapshots.sawCommit(rebuilt.mark, txid) ? [{ change, intoEpoch: rebuilt.epoch }] : [];
    });
    const outcomes = await Promise.all(
      late.map(({ change: c, intoEpoch }) => rebuilds.replay({ target: c.target, userId: c.userId, liked: c.liked, version: c.version, intoEpoch })),
    );
    // Too late to tell whether Redis superseded it: take the target out, and the next
    // read rebuilds it from PostgreSQL, which holds the change (and replays what is in flight).
    const stale = new Map(late.filter((_, i) => outcomes[i] === "tooLate").map(({ change }) => [targetKey(change.target), change.target]));
    await Promise.all([...stale.values()].map((target) => rebuilds.drop(target)));
  }

  return {
    async persist(changes) {
      const applied = await likeHistory.apply(coalesce(changes));
      // First, as a redelivery would not credit again: rows already moved give no delta.
      // An author Redis does not hold is left alone: its rebuild reads the credit from PostgreSQL.
      const credits = applied.deltas.filter((d) => d.target.type === "user" && d.name === "likesReceived");
      await Promise.all(credits.map((d) => counters.bump(d.target, d.name, d.delta))).catch(onRedisFailure);
      // A replay that fails fails the batch: its redelivery replays the changes again (see above).
      await replayIntoRebuilt(applied.current);
      return applied;
    },
  };
}
