// The part of the composition root that applies changes to PostgreSQL and has Redis
// follow: the pipeline's persist batches, and the changes an API process appends
// itself when a Redis failover may have taken them back (domain/lost-changes.ts).
import type { Logger } from "pino";
import { createChangePersistence, type ChangePersistence } from "../domain/persistence.js";
import type { AppliedChanges } from "../domain/model/index.js";
import type { CounterStore, ListStore, PersistStore, RankingStore, RebuildStore, SnapshotStore } from "../domain/ports/index.js";
import { isRedisUnavailable, type RedisClient } from "../stores/redis/client.js";
import { createMemberIndexHolds, type MemberIndexes } from "../stores/redis/member-index-store.js";

export interface PersistenceParts {
  readonly redis: RedisClient;
  readonly persistStore: PersistStore;
  readonly rebuilds: RebuildStore;
  readonly snapshots: SnapshotStore;
  readonly counters: CounterStore;
  readonly lists: ListStore;
  readonly rankings: RankingStore;
  readonly memberIndexes: MemberIndexes | null;
}

/** Builds the change persistence; `afterDatabaseCommit` runs right after each PostgreSQL commit (tests inject crashes there). */
export function composePersistence(
  parts: PersistenceParts,
  logger: Logger,
): (afterDatabaseCommit?: (applied: AppliedChanges) => Promise<void>) => ChangePersistence {
  const { redis, persistStore, rebuilds, snapshots, counters, lists, rankings, memberIndexes } = parts;
  return (afterDatabaseCommit) =>
    createChangePersistence({
      persistStore,
      rebuilds,
      snapshots,
      counters,
      lists,
      rankings,
      ...(memberIndexes && { memberIndexes: createMemberIndexHolds(redis, memberIndexes) }),
      afterDatabaseCommit,
      isRedisUnavailable,
      onRedisBehind: (target, redisVersion, postgresVersion) =>
        logger.warn(
          { target: `${target.type}:${target.id}`, redisVersion: String(redisVersion), postgresVersion: String(postgresVersion) },
          "Redis lacks a change PostgreSQL committed (a failover or a restart took it back): the target is loaded again from PostgreSQL",
        ),
    });
}
