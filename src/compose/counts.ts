// The part of the composition root that reads and loads counts: Redis's memory
// policy, whether Redis answers, the loads of targets from PostgreSQL, the warmer
// that fills Redis in after reads, and the counter service over them.
import type { Logger } from "pino";
import type { Config } from "../config.js";
import { lookupTarget, type Catalog } from "../domain/catalog.js";
import { createCounterService, type CounterService } from "../domain/counters.js";
import { createMemoryPolicy, type MemoryPolicy } from "../domain/memory-policy.js";
import type { CounterStore, RebuildStore, SnapshotStore } from "../domain/ports/index.js";
import { createRebuildSlots } from "../domain/rebuild-slots.js";
import { createTargetLoader } from "../domain/target-loads.js";
import { AcknowledgedChanges, type AcknowledgedChange } from "../domain/acknowledged-changes.js";
import type { RelationChange } from "../domain/model/index.js";
import { createLostChangeCheck } from "../domain/lost-changes.js";
import { createPairVersions } from "../stores/postgres/pair-versions.js";
import { splitVersion } from "../stores/versions.js";
import { createTargetUses, type TargetUses } from "../domain/target-uses.js";
import { createWarmer, type Warmer } from "../domain/warmer.js";
import type { Database } from "../stores/postgres/database.js";
import { createPersistedCounts } from "../stores/postgres/persisted-counts.js";
import type { RedisClient } from "../stores/redis/client.js";
import { lastConnectionLoss, onConnectionLoss } from "../stores/redis/connection-losses.js";
import type { RedisKeys } from "../stores/redis/keys.js";
import { createMemberIndexLookup, type MemberIndexes } from "../stores/redis/member-index-store.js";
import { createMemoryStore } from "../stores/redis/memory-store.js";
import { createReachability, type RedisReachability } from "../stores/redis/reachability.js";
import { createUseRecords } from "../stores/redis/use-records.js";

export interface CountsParts {
  readonly db: Database;
  readonly redis: RedisClient;
  readonly keys: RedisKeys;
  readonly counterStore: CounterStore;
  readonly rebuilds: RebuildStore;
  readonly snapshots: SnapshotStore;
  readonly catalog: Catalog;
  /** Where this Redis keeps member indexes; null on a cluster. */
  readonly memberIndexes: MemberIndexes | null;
  /** Applies changes to PostgreSQL as the pipeline does: what a failover may take back is appended through it. */
  readonly persist: (changes: readonly RelationChange[]) => Promise<{ readonly passed: readonly unknown[] }>;
}

export interface ComposedCounts {
  readonly memory: MemoryPolicy;
  readonly reachability: RedisReachability;
  readonly warmer: Warmer;
  readonly uses: TargetUses;
  readonly counters: CounterService;
  /** What loads found of targets held from another replication history, and changes a failover lost, since start. */
  readonly loads: { histories(): LoadHistories };
  /** The changes this process acknowledged lately (acknowledged-changes.ts). */
  readonly journal: AcknowledgedChanges;
  /** Stops appending acknowledged changes to PostgreSQL as connections close (the process stops). */
  readonly closeJournal: () => void;
}

export interface LoadHistories {
  /** Targets kept as they were, lacking nothing PostgreSQL holds. */
  readonly adopted: number;
  /** Targets lacking changes PostgreSQL holds, loaded again. */
  readonly reloaded: number;
  /** Changes this process acknowledged that no store held after a failover, and it could not append. */
  readonly lostAcknowledged: number;
  /** Changes this process acknowledged that PostgreSQL lacked as a connection closed or a failover settled, appended by it. */
  readonly appendedAcknowledged: number;
}

/** The changes this process acknowledged lately, and what appends those a failover may take back to PostgreSQL. */
function composeLostChanges(config: Config, parts: CountsParts, logger: Logger) {
  const journal = new AcknowledgedChanges();
  const lookup = lookupTarget(parts.catalog);
  const describe = (changes: readonly AcknowledgedChange[]) =>
    changes.slice(0, 100).map((c) => `${c.relation} ${c.target.type}:${c.target.id} user ${c.userId} ${c.member ? "member" : "not member"} v${c.version}`);
  const lostChanges = createLostChangeCheck({
    journal,
    versions: createPairVersions(parts.db),
    async redisHolds(changes) {
      const held = await parts.rebuilds.rebuilds(changes.map((c) => c.target));
      return changes.map((c, i) => {
        const stamped = held[i]?.version;
        return stamped !== undefined && splitVersion(stamped).epoch === splitVersion(c.version).epoch && stamped >= c.version;
      });
    },
    authors: async (targets) => (await lookup(targets)).map((found) => found?.authorId ?? null),
    persist: parts.persist,
    recentMs: commitLagMs(config),
    onAppended: (changes, reason, passed) =>
      reason === "failover"
        ? logger.warn(
            { lacking: changes.length, appended: passed, pairs: describe(changes) },
            "a Redis failover lost changes this process acknowledged; it appended them to PostgreSQL, and their targets load from there",
          )
        : logger.info(
            { lacking: changes.length, appended: passed, pairs: describe(changes) },
            "a connection to Redis closed: the changes this process acknowledged just before that PostgreSQL lacked were appended to it, in case a failover takes them back",
          ),
    onLost: (changes, err) =>
      logger.error(
        { err, lost: changes.length, pairs: describe(changes) },
        "a Redis failover lost changes this process acknowledged, and PostgreSQL did not take them: no store holds them (REDIS_REPLICA_ACKS prevents this)",
      ),
    onFollowUpFailure: (err) =>
      logger.warn(
        { err },
        "changes appended to PostgreSQL after a Redis failover: Redis did not take their credits and lists within a minute; reconcile repairs them",
      ),
  });
  const stopWatching = onConnectionLoss(parts.redis, (atMs) => {
    lostChanges
      .appendRecent(atMs)
      .catch((err: unknown) =>
        logger.warn(
          { err },
          "the changes acknowledged before a connection to Redis closed could not be appended to PostgreSQL; checked again after a failover",
        ),
      );
  });
  return {
    journal,
    lostChanges,
    close() {
      stopWatching();
      lostChanges.close();
    },
  };
}

/** How long a change the relay published takes at most to commit in PostgreSQL: both lingers and a margin. */
const commitLagMs = (config: Config) => config.relay.lingerMs + config.persist.lingerMs + 2_000;

export function composeCounts(config: Config, parts: CountsParts, logger: Logger): ComposedCounts {
  const { db, redis, keys, counterStore, rebuilds, snapshots, catalog, memberIndexes } = parts;
  // Redis's memory policy (domain/memory-policy.ts): cold targets evicted, then loads refused, as Redis nears its maxmemory.
  const memory = createMemoryPolicy({
    store: createMemoryStore(redis, keys),
    rebuilds,
    snapshots,
    onEvicted: (evicted, reading) =>
      logger.warn(
        { evicted, usedBytes: reading.usedBytes, maxBytes: reading.maxBytes },
        "Redis is near its maxmemory: the least recently used targets were evicted",
      ),
    onFailure: (err) => logger.warn({ err }, "Redis's memory could not be measured or cold targets evicted; trying again on the next load"),
  });
  // Whether Redis answers: while it does not, reads come from PostgreSQL and writes that need it are refused at once.
  const reachability = createReachability(redis, {
    onChange: (reachable, cause) =>
      reachable
        ? logger.info("Redis answers again: counts are read from it again")
        : logger.warn({ err: cause }, "Redis cannot be reached: counts are read from PostgreSQL and changes that need Redis are refused until it answers"),
  });
  const lost = composeLostChanges(config, parts, logger);
  const { journal, lostChanges } = lost;
  const loader = createTargetLoader({
    rebuildStore: rebuilds,
    snapshots,
    counterStore,
    lookup: lookupTarget(catalog),
    // What the relay published before a failover commits within both lingers and a margin: with
    // 500 ms, under the chaos suite's load, late commits still found targets adopted without them.
    commitLagMs: commitLagMs(config),
    connectionLostAt: () => lastConnectionLoss(redis),
    onSuspectEpisode: (atMs) =>
      void lostChanges.check(atMs).catch((err: unknown) => logger.warn({ err }, "the changes acknowledged before a Redis failover could not be checked")),
    onLoss: (target, redisVersion, postgresVersion) =>
      logger.warn(
        { target: `${target.type}:${target.id}`, redisVersion: redisVersion.toString(), postgresVersion: postgresVersion.toString() },
        "Redis lost changes of this target to a failover or a restart (PostgreSQL holds newer ones): it is loaded again from PostgreSQL",
      ),
  });
  // Writes' loads of the targets they change, a few at a time per process.
  const slots = createRebuildSlots({ atOnce: config.rebuilds.atOnce, maxWaiting: config.rebuilds.maxWaiting });
  // Loads what reads answered from PostgreSQL, in the background, a batch per snapshot, after writes' loads.
  const warmer = createWarmer({
    loader,
    admit: memory.admit,
    yieldTo: () => slots.running > 0 || !reachability.reachable(),
    perSecond: config.warmer.perSecond,
    batchSize: config.warmer.batchSize,
    onFailure: (err) => logger.warn({ err }, "targets reads asked for could not be loaded into Redis; reads answer them from PostgreSQL meanwhile"),
  });
  // Reads and changes recorded as uses, so eviction goes by real use (a reconcile pass's reads are not).
  const uses = createTargetUses({
    records: createUseRecords(redis, keys),
    onFailure: (err) => logger.warn({ err }, "uses of targets could not be recorded in Redis; they are recorded at their next use"),
  });
  const counters = createCounterService({
    counterStore,
    rebuildStore: rebuilds,
    loader,
    cold: { persisted: createPersistedCounts(db), snapshots, ...(memberIndexes && { indexes: createMemberIndexLookup(redis, memberIndexes) }) },
    warmer,
    reachability,
    uses,
    slots,
    admitLoad: memory.admit,
  });
  const loads = { histories: () => ({ ...loader.histories(), lostAcknowledged: lostChanges.lost(), appendedAcknowledged: lostChanges.appended() }) };
  return { memory, reachability, warmer, uses, counters, loads, journal, closeJournal: () => lost.close() };
}
