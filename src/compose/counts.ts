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
import { AcknowledgedChanges } from "../domain/acknowledged-changes.js";
import { createLostChangeCheck } from "../domain/lost-changes.js";
import { createPairVersions } from "../stores/postgres/pair-versions.js";
import { splitVersion } from "../stores/versions.js";
import { createTargetUses, type TargetUses } from "../domain/target-uses.js";
import { createWarmer, type Warmer } from "../domain/warmer.js";
import type { Database } from "../stores/postgres/database.js";
import { createPersistedViews } from "../stores/postgres/persisted-views.js";
import { lastConnectionLoss, type RedisClient } from "../stores/redis/client.js";
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
}

export interface LoadHistories {
  /** Targets kept as they were, lacking nothing PostgreSQL holds. */
  readonly adopted: number;
  /** Targets lacking changes PostgreSQL holds, loaded again. */
  readonly reloaded: number;
  /** Changes this process acknowledged that no store held after a failover. */
  readonly lostAcknowledged: number;
}

/** The changes this process acknowledged lately, and the check that reports those a failover lost from every store. */
function composeLostChanges(db: Database, rebuilds: RebuildStore, logger: Logger) {
  const journal = new AcknowledgedChanges();
  const lostChanges = createLostChangeCheck({
    journal,
    versions: createPairVersions(db),
    async redisHolds(changes) {
      const held = await rebuilds.rebuilds(changes.map((c) => c.target));
      return changes.map((c, i) => {
        const stamped = held[i]?.version;
        return stamped !== undefined && splitVersion(stamped).epoch === splitVersion(c.version).epoch && stamped >= c.version;
      });
    },
    onLost: (changes) =>
      logger.error(
        {
          lost: changes.length,
          pairs: changes
            .slice(0, 100)
            .map((c) => `${c.relation} ${c.target.type}:${c.target.id} user ${c.userId} ${c.member ? "member" : "not member"} v${c.version}`),
        },
        "a Redis failover lost changes this process acknowledged: neither the promoted replica nor PostgreSQL holds them (REDIS_REPLICA_ACKS prevents this)",
      ),
  });
  return { journal, lostChanges };
}

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
  const { journal, lostChanges } = composeLostChanges(db, rebuilds, logger);
  const loader = createTargetLoader({
    rebuildStore: rebuilds,
    snapshots,
    counterStore,
    lookup: lookupTarget(catalog),
    // What the relay published before a failover commits within both lingers and a margin: with
    // 500 ms, under the chaos suite's load, late commits still found targets adopted without them.
    commitLagMs: config.relay.lingerMs + config.persist.lingerMs + 2_000,
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
    cold: { persisted: createPersistedViews(db), snapshots, ...(memberIndexes && { indexes: createMemberIndexLookup(redis, memberIndexes) }) },
    warmer,
    reachability,
    uses,
    slots,
    admitLoad: memory.admit,
  });
  const loads = { histories: () => ({ ...loader.histories(), lostAcknowledged: lostChanges.lost() }) };
  return { memory, reachability, warmer, uses, counters, loads, journal };
}
