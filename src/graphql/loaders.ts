// One set of DataLoaders per request: a feed's many fields become one Redis
// round trip for counts (and membership), one SQL query for unseen rows.
import DataLoader from "dataloader";
import type { Services } from "../domain/services.js";
import { targetKey, type Target, type TargetKey } from "../domain/targets.js";
import type { Viewer } from "../domain/identity.js";
import type { CounterHash } from "../stores/redis/counter-hash.js";
import type { CommentRecord, PostRecord, UserRecord } from "../stores/postgres/records.js";

export interface Loaders {
  readonly user: DataLoader<bigint, UserRecord | null>;
  readonly post: DataLoader<bigint, PostRecord | null>;
  readonly comment: DataLoader<bigint, CommentRecord | null>;
  readonly counts: DataLoader<Target, CounterHash, TargetKey>;
  /** Whether the viewer likes a target; only for a signed-in viewer. */
  readonly liked: DataLoader<Target, boolean, TargetKey>;
}

export function createLoaders(services: Services, viewer: Viewer | null): Loaders {
  const { catalog, counters, likes } = services;
  const counts = new DataLoader<Target, CounterHash, TargetKey>((targets) => counters.read(targets), {
    cacheKeyFn: targetKey,
  });
  const liked = new DataLoader<Target, boolean, TargetKey>(
    (targets) =>
      viewer
        ? likes.hasLiked(targets, viewer.userId, async (t) => (await counts.load(t)).generation)
        : Promise.resolve(targets.map(() => false)),
    { cacheKeyFn: targetKey },
  );
  return {
    user: new DataLoader((ids) => catalog.users(ids)),
    post: new DataLoader((ids) => catalog.posts(ids)),
    comment: new DataLoader((ids) => catalog.comments(ids)),
    counts,
    liked,
  };
}

/** Seeds the loaders with a like's own result, so the payload needs no second read. */
export function primeAfterLike(loaders: Loaders, target: Target, state: CounterHash, liked: boolean): void {
  loaders.counts.clear(target).prime(target, state);
  loaders.liked.clear(target).prime(target, liked);
}
