// Persisting like changes: fold a batch to the newest change per (target, user)
// and apply it; the store skips anything PostgreSQL already has a newer version of.
//
// A target rebuilt into Redis from PostgreSQL could not see changes that were
// still on their way (in RabbitMQ, or in a batch) at that moment. When such a
// change reaches PostgreSQL it is replayed into the rebuilt target, so Redis and
// PostgreSQL end in agreement without losing it or counting it twice.
//
// Authors' likesReceived lives in another slot than the liked target, so no
// like script can move it. It moves here instead, in Redis by the same deltas
// just committed to PostgreSQL (rows really inserted or deleted): both stores
// derive it from one source, about a second after the like.
import type { AppliedLikes, PersistedLikeStore } from "../stores/postgres/like-store.js";
import type { CounterStore } from "../stores/redis/counter-store.js";
import type { RebuildStore } from "../stores/redis/rebuild-store.js";
import { coalesce, type LikeChange } from "./like-changes.js";
import { targetKey } from "./targets.js";

export interface LikePersistence {
  persist(changes: readonly LikeChange[]): Promise<AppliedLikes>;
}

export interface LikePersistenceDeps {
  readonly store: PersistedLikeStore;
  readonly cache: RebuildStore;
  readonly counters: CounterStore;
  /** Told when bringing a committed batch into Redis failed (a replay, an author's credit). */
  readonly onCacheFailure: (error: unknown) => void;
}

export function createLikePersistence({ store, cache, counters, onCacheFailure }: LikePersistenceDeps): LikePersistence {
  async function replayIntoRebuilt(changes: readonly LikeChange[]): Promise<void> {
    if (changes.length === 0) return;
    const targets = [...new Map(changes.map((c) => [targetKey(c.target), c.target])).values()];
    const rebuiltAt = new Map((await cache.rebuiltAt(targets)).map((at, i) => [targetKey(targets[i]!), at]));
    const late = changes.filter((c) => {
      const at = rebuiltAt.get(targetKey(c.target));
      return at != null && c.version < at;
    });
    await Promise.all(late.map((c) => cache.replay(c)));
  }

  return {
    async persist(changes) {
      const applied = await store.apply(coalesce(changes));
      // PostgreSQL has committed: a failure here must not fail the batch, whose redelivery would apply nothing.
      await replayIntoRebuilt(applied.passed).catch(onCacheFailure);
      // An author Redis does not hold is left alone: its rebuild reads the credit from PostgreSQL.
      const credits = applied.deltas.filter((d) => d.type === "user" && d.name === "likesReceived");
      await Promise.all(credits.map((d) => counters.bump({ type: "user", id: d.id }, d.name, d.delta))).catch(onCacheFailure);
      return applied;
    },
  };
}
