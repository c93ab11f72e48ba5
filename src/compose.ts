// The composition root: every store and service of the service is built here,
// from the clients an entry point opened, and nowhere else. The stores, the counts,
// the use cases and the pipeline each have a part of their own (src/compose/).
import type { Logger } from "pino";
import { composeCounts, type ComposedCounts } from "./compose/counts.js";
import { composePersistence } from "./compose/persistence.js";
import { composePipeline } from "./compose/pipeline.js";
import { composeServices } from "./compose/services.js";
import { composeStores, type ComposedClients, type ComposedStores } from "./compose/stores.js";
import { outboxSampleMs, readinessShareMs } from "./compose/tunables.js";
import type { TargetUses } from "./domain/target-uses.js";
import type { Warmer } from "./domain/warmer.js";
import type { Config } from "./config.js";
import { createCatalog } from "./domain/catalog.js";
import { KnownUsers } from "./domain/known-users.js";
import type { MemberIndexLoader } from "./domain/member-indexes.js";
import type { Reachability } from "./domain/ports/index.js";
import { createRankingRefresher, type RankingRefresher } from "./domain/rankings.js";
import type { Services } from "./domain/services.js";
import { startUserDirectory, type UserDirectory } from "./domain/user-directory.js";
import { createReadiness, outboxBacklog, shared, type CheckFailures, type Readiness } from "./graphql/readiness.js";
import type { PipelineHooks, RunningPipeline } from "./pipeline/pipeline.js";
import type { ReconcileProgress, ReconcileSummary } from "./pipeline/reconcile-pass.js";
import { isStoreUnavailable } from "./stores/clients.js";
import { createRankingSource } from "./stores/postgres/ranking-source.js";
import type { HotCounts } from "./stores/redis/hot-counts.js";
import { createLease } from "./stores/redis/lease-store.js";
import { createOutboxStore } from "./stores/redis/outbox-store.js";

export type { ComposedClients } from "./compose/stores.js";
export { readinessShareMs } from "./compose/tunables.js";

export interface App {
  /** The use cases the API serves. */
  readonly services: Services;
  /** Whether an error says a store did not answer in time or could not be reached. */
  readonly isUnavailable: (error: unknown) => boolean;
  /** Whether every client answers within READINESS_TIMEOUT_MS; the outbox backlog above OUTBOX_WARN_LENGTH degrades it. */
  readonly readiness: Readiness;
  /** Starts the persistence pipeline on its own message bus; closing it closes the bus too. */
  startPipeline(hooks?: PipelineHooks): Promise<RunningPipeline>;
  /** The hot ranking's refresh and rebuild, as the pipeline runs them. */
  readonly rankings: RankingRefresher;
  /** Counts kept in this process's memory (an API process given count invalidations), or null. */
  readonly hotCounts: HotCounts | null;
  /** Loads the member indexes feeds find missing (a standalone Redis), or null on a cluster. */
  readonly memberIndexes: MemberIndexLoader | null;
  /** Loads into Redis, in the background, the targets reads answered from PostgreSQL. */
  readonly warmer: Warmer;
  /** Whether Redis answers, as this process last found. */
  readonly reachability: Reachability;
  /** The loads of targets from PostgreSQL: what they found held from another replication history. */
  readonly loads: ComposedCounts["loads"];
  /** The targets this process used, told to Redis's use records every 30 s (eviction goes by them). */
  readonly uses: TargetUses;
  /** Stops the background loads and the watch on Redis's reachability. */
  close(): Promise<void>;
  /** One full reconcile pass; its repairs are published for a running pipeline to apply. */
  reconcileOnce(onProgress?: (progress: ReconcileProgress) => void): Promise<ReconcileSummary>;
  /**
   * For a process that serves GraphQL: starts learning which users exist, so that
   * authenticating their tokens sends no SQL. Returns at once; loading runs in the
   * background, and until it is done tokens are checked as without it. Once only.
   */
  startUserDirectory(): UserDirectory;
}

export interface ComposeOptions {
  /** Where the readiness counts the checks that fail in each of its reports (an API process's metrics). */
  readonly readinessFailures?: CheckFailures;
}

/**
 * The readiness every probe of a process shares: one check a second whatever the probes' rate,
 * the outbox's length (a sweep of every stream) at most every 5 s.
 */
function composeReadiness(config: Config, clients: ComposedClients, stores: ComposedStores, options: ComposeOptions): Readiness {
  // Only its length is used here (XLEN of every stream): it opens and reads nothing.
  const backlog = createOutboxStore(clients.redis, stores.keys, { batchSize: config.relay.batchSize });
  const advisories = {
    outbox: outboxBacklog(
      shared(() => backlog.length(), outboxSampleMs),
      config.relay.outboxWarnLength,
    ),
    ...clients.advisories?.(),
  };
  return shared(createReadiness(clients.probes?.() ?? {}, config.readinessTimeoutMs, advisories, options.readinessFailures), readinessShareMs);
}

/** Starts learning which users exist, once per composed app. */
function userDirectoryStarter(clients: ComposedClients, stores: ComposedStores, knownUsers: KnownUsers, logger: Logger): () => UserDirectory {
  let started = false;
  return () => {
    if (started) throw new Error("The user directory was started already: start it once per composed app.");
    started = true;
    const directoryLogger = logger.child({ component: "user-directory" });
    return startUserDirectory({
      known: knownUsers,
      users: stores.users,
      announcements: clients.subscriberRedis ? stores.userAnnouncements : null,
      onLoaded: (load) => directoryLogger.info(load, "every existing user is known; their tokens are checked without SQL"),
      onLoadFailure: (err, retryInMs) => directoryLogger.warn({ err, retryInMs }, "existing users could not be read from PostgreSQL; reading again"),
      onListenFailure: (err) => directoryLogger.warn({ err }, "new users cannot be heard of from Redis; each is looked up once instead"),
    });
  };
}

export function compose(config: Config, clients: ComposedClients, logger: Logger, options: ComposeOptions = {}): App {
  const stores = composeStores(config, clients, logger);
  const { redis } = clients;
  const rankings = createRankingRefresher({
    store: stores.rankingStore,
    source: createRankingSource(clients.db),
    lease: createLease(redis, stores.keys.ranking.lock),
  });
  const catalog = createCatalog({ users: stores.users, posts: stores.posts, comments: stores.comments });
  // Empty unless startUserDirectory() fills it: a worker or a reconcile pass authenticates nobody.
  const knownUsers = new KnownUsers();
  const persistenceWith = composePersistence(
    {
      redis,
      persistStore: stores.persistStore,
      rebuilds: stores.rebuilds,
      snapshots: stores.snapshots,
      counters: stores.counterStore,
      lists: stores.listStore,
      rankings: stores.rankingStore,
      memberIndexes: stores.memberIndexes,
    },
    logger,
  );
  const appending = persistenceWith();
  // Counts from Redis, or PostgreSQL where it holds none; Redis filled in behind reads, within its memory policy.
  const counts = composeCounts(config, { ...stores, db: clients.db, redis, catalog, persist: (changes) => appending.persist(changes) }, logger);
  const services = composeServices(config, { clients, stores, catalog, counts, knownUsers }, logger);
  const pipeline = composePipeline(config, { clients, stores, rankings, persistenceWith }, logger);
  const { reachability, warmer, uses, loads, closeJournal } = counts;
  return {
    services,
    isUnavailable: isStoreUnavailable,
    readiness: composeReadiness(config, clients, stores, options),
    rankings,
    hotCounts: stores.hotCounts,
    memberIndexes: stores.memberIndexLoader,
    warmer,
    reachability,
    uses,
    loads,
    async close() {
      closeJournal();
      await warmer.close();
      await uses.close();
      reachability.close();
    },
    startPipeline: (hooks) => pipeline.start(hooks),
    reconcileOnce: (onProgress) => pipeline.reconcileOnce(onProgress),
    startUserDirectory: userDirectoryStarter(clients, stores, knownUsers, logger),
  };
}
