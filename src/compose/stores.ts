// The part of the composition root that builds the stores: PostgreSQL's per aggregate,
// Redis's over one key layout, and the counts an API process keeps in memory.
import type { Logger } from "pino";
import type { Config } from "../config.js";
import { createMemberIndexLoader, type MemberIndexLoader } from "../domain/member-indexes.js";
import type { Clients } from "../stores/clients.js";
import { createCommentStore } from "../stores/postgres/comment-store.js";
import { createDatabaseReconcileStore } from "../stores/postgres/database-reconcile-store.js";
import { createMemberPageStore } from "../stores/postgres/member-page-store.js";
import { createPersistStore } from "../stores/postgres/persist-store.js";
import { createPostStore } from "../stores/postgres/post-store.js";
import { createSnapshotStore } from "../stores/postgres/snapshot-store.js";
import { createUserStore } from "../stores/postgres/user-store.js";
import { createCounterStore } from "../stores/redis/counter-store.js";
import { HotCounts } from "../stores/redis/hot-counts.js";
import { createRedisKeys, type RedisKeys } from "../stores/redis/keys.js";
import { createListStore } from "../stores/redis/list-store.js";
import { createMemberIndexStore, memberIndexesOf, type MemberIndexes } from "../stores/redis/member-index-store.js";
import { createRankingStore } from "../stores/redis/ranking-store.js";
import { createRebuildStore } from "../stores/redis/rebuild-store.js";
import { createRedisReconcileStore } from "../stores/redis/redis-reconcile-store.js";
import { createUserAnnouncements } from "../stores/redis/user-announcements.js";
import { hotCountsMaxStalenessMs } from "./tunables.js";

/** The clients compose() uses; the pipeline and reconcile passes also need RabbitMQ, and the pipeline the relay's Redis. */
export type ComposedClients = Pick<Clients, "db" | "redis"> &
  Partial<Pick<Clients, "rabbit" | "relayRedis" | "subscriberRedis" | "countInvalidations" | "probes" | "advisories">>;

export type ComposedStores = ReturnType<typeof composeStores>;

/** Counts kept in an API process's memory while Redis tells it of every write to them; never older than the bound. */
function hotCountsOf(config: Config, clients: ComposedClients, keys: RedisKeys): HotCounts | null {
  if (!clients.countInvalidations) return null;
  return new HotCounts({
    invalidations: clients.countInvalidations,
    targetOf: (key) => keys.parseCounters(key),
    maxTargets: config.hotCountsTargets,
    maxStalenessMs: hotCountsMaxStalenessMs,
  });
}

/** Loads the member indexes feeds find missing, where Redis keeps them (a standalone Redis). */
function memberIndexLoaderOf(
  clients: ComposedClients,
  memberIndexes: MemberIndexes | null,
  memberPages: ReturnType<typeof createMemberPageStore>,
  logger: Logger,
): MemberIndexLoader | null {
  if (!memberIndexes) return null;
  return createMemberIndexLoader({
    indexes: createMemberIndexStore(clients.redis, memberIndexes),
    memberPages,
    onFailure: (err) => logger.warn({ err }, "a member index could not be loaded; feeds look memberships up target by target until it is"),
  });
}

export function composeStores(config: Config, clients: ComposedClients, logger: Logger) {
  const { db, redis } = clients;
  const keys = createRedisKeys(config.redisPartitions);
  const memberPages = createMemberPageStore(db);
  const hotCounts = hotCountsOf(config, clients, keys);
  const memberIndexes = memberIndexesOf(redis, keys);
  const memberIndexLoader = memberIndexLoaderOf(clients, memberIndexes, memberPages, logger);
  const counterStore = createCounterStore(redis, keys, {
    ...(hotCounts ? { hotCounts } : {}),
    ...(memberIndexes && memberIndexLoader
      ? { memberIndexes: { indexes: memberIndexes, missing: (relation, type, userId) => memberIndexLoader.missing(relation, type, userId) } }
      : {}),
  });
  return {
    keys,
    users: createUserStore(db),
    posts: createPostStore(db),
    comments: createCommentStore(db),
    memberPages,
    persistStore: createPersistStore(db),
    snapshots: createSnapshotStore(db),
    databaseReconcile: createDatabaseReconcileStore(db),
    hotCounts,
    memberIndexes,
    memberIndexLoader,
    counterStore,
    rebuilds: createRebuildStore(redis, keys),
    redisReconcile: createRedisReconcileStore(redis, keys),
    listStore: createListStore(redis, keys),
    rankingStore: createRankingStore(redis, keys),
    userAnnouncements: createUserAnnouncements(redis, clients.subscriberRedis ?? null, keys),
  };
}
