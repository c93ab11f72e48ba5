// Persisting like changes: fold a batch to the newest change per (target, user)
// and apply it; the store skips anything PostgreSQL already has a newer version of.
import type { AppliedLikes, PersistedLikeStore } from "../stores/postgres/like-store.js";
import { coalesce, type LikeChange } from "./like-changes.js";

export interface LikePersistence {
  persist(changes: readonly LikeChange[]): Promise<AppliedLikes>;
}

export function createLikePersistence(store: PersistedLikeStore): LikePersistence {
  return { persist: (changes) => store.apply(coalesce(changes)) };
}
