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
import { targetKey, type AppliedLikes, type LikeChange } from "./model.js";
import type { CounterStore, LikeHistoryStore, RebuildStore } from "./ports.js";

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
  readonly counters: CounterStore;
  /** Told when bringing a committed batch into Redis failed (a replay, an author's credit). */
  readonly onRedisFailure: (error: unknown) => void;
}

export function createLikePersistence({ likeHistory, rebuilds, counters, onRedisFailure }: LikePersistenceDeps): LikePersistence {
  async function replayIntoRebuilt(changes: readonly LikeChange[]): Promise<void> {
    if (changes.length === 0) return;
    const targets = [...new Map(changes.map((c) => [targetKey(c.target), c.target])).values()];
    const epochStart = new Map((await rebuilds.epochStarts(targets)).map((start, i) => [targetKey(targets[i]!), start]));
    const late = changes.filter((c) => {
      const start = epochStart.get(targetKey(c.target));
      return start != null && c.version < start;
    });
    const outcomes = await Promise.all(late.map((c) => rebuilds.replay({ target: c.target, userId: c.userId, liked: c.liked, version: c.version })));
    // Too late to tell whether Redis superseded it: take the target out, and the next
    // read rebuilds it from PostgreSQL, which holds the change (and replays what is in flight).
    const stale = new Map(late.filter((_, i) => outcomes[i] === "tooLate").map((c) => [targetKey(c.target), c.target]));
    await Promise.all([...stale.values()].map((target) => rebuilds.drop(target)));
  }

  return {
    async persist(changes) {
      const applied = await likeHistory.apply(coalesce(changes));
      // PostgreSQL has committed: a failure here must not fail the batch, whose redelivery would apply nothing.
      await replayIntoRebuilt(applied.passed).catch(onRedisFailure);
      // An author Redis does not hold is left alone: its rebuild reads the credit from PostgreSQL.
      const credits = applied.deltas.filter((d) => d.target.type === "user" && d.name === "likesReceived");
      await Promise.all(credits.map((d) => counters.bump(d.target, d.name, d.delta))).catch(onRedisFailure);
      return applied;
    },
  };
}
