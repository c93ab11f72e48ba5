// The composition root: every store and service of the service is built here,
// from the clients an entry point opened, and nowhere else.
import type { Logger } from "pino";
import { composeCounts, type ComposedCounts } from "./compose/counts.js";
import { composePersistence } from "./compose/persistence.js";
import { composeRateLimits } from "./compose/rate-limits.js";
import type { TargetUses } from "./domain/target-uses.js";
import type { Warmer } from "./domain/warmer.js";
import type { Config } from "./config.js";
import { createCatalog, findOne } from "./domain/catalog.js";
import { createContentService } from "./domain/content.js";
import { KnownUsers } from "./domain/known-users.js";
import { createListService } from "./domain/lists.js";
import { createMemberIndexLoader, type MemberIndexLoader } from "./domain/member-indexes.js";
import { createLiveCounts } from "./domain/live-counts.js";
import { createMembershipService } from "./domain/memberships.js";
import type { MessageBus, Reachability } from "./domain/ports/index.js";
import { createRankingRefresher, createRankingService, type RankingRefresher } from "./domain/rankings.js";
import { createRepairService } from "./domain/repairs.js";
import type { Services } from "./domain/services.js";
import { createTokenService } from "./graphql/tokens.js";
import { startUserDirectory, type UserDirectory } from "./domain/user-directory.js";
import { createUserService } from "./domain/users.js";
import { createViewService } from "./domain/views.js";
import { createReadiness, outboxBacklog, shared, type CheckFailures, type Readiness } from "./graphql/readiness.js";
import { startPipeline, type PipelineHooks, type RunningPipeline } from "./pipeline/pipeline.js";
import { runReconcile, type ReconcileProgress, type ReconcileSummary } from "./pipeline/reconcile-pass.js";
import { isStoreUnavailable, type Clients } from "./stores/clients.js";
import { createCommentStore } from "./stores/postgres/comment-store.js";
import { createMemberPageStore } from "./stores/postgres/member-page-store.js";
import { createPersistStore } from "./stores/postgres/persist-store.js";
import { createPostStore } from "./stores/postgres/post-store.js";
import { createRankingSource } from "./stores/postgres/ranking-source.js";
import { createDatabaseReconcileStore } from "./stores/postgres/database-reconcile-store.js";
import { createSnapshotStore } from "./stores/postgres/snapshot-store.js";
import { createUserStore } from "./stores/postgres/user-store.js";
import { createMessageBus } from "./stores/rabbitmq/message-bus.js";
import { createTopology } from "./stores/rabbitmq/topology.js";
import { createCounterStore } from "./stores/redis/counter-store.js";
import { createCountChanges } from "./stores/redis/count-changes.js";
import { HotCounts } from "./stores/redis/hot-counts.js";
import { createRedisKeys } from "./stores/redis/keys.js";
import { createLease, createTickClaims } from "./stores/redis/lease-store.js";
import { createListStore } from "./stores/redis/list-store.js";
import { createMemberIndexStore, memberIndexesOf } from "./stores/redis/member-index-store.js";
import { createMembershipStore } from "./stores/redis/membership-store.js";
import { createMemoryStore } from "./stores/redis/memory-store.js";
import { createOutboxStore } from "./stores/redis/outbox-store.js";
import { createRankingStore } from "./stores/redis/ranking-store.js";
import { createRateBudgetStore } from "./stores/redis/rate-budget-store.js";
import { createRebuildStore } from "./stores/redis/rebuild-store.js";
import { createRedisReconcileStore } from "./stores/redis/redis-reconcile-store.js";
import { createUserAnnouncements } from "./stores/redis/user-announcements.js";
import { createViewStore } from "./stores/redis/view-store.js";

/** The clients compose() uses; the pipeline and reconcile passes also need RabbitMQ, and the pipeline the relay's Redis. */
export type ComposedClients = Pick<Clients, "db" | "redis"> &
  Partial<Pick<Clients, "rabbit" | "relayRedis" | "subscriberRedis" | "countInvalidations" | "probes" | "advisories">>;

/** How stale a count kept in memory may be served: DESIGN's bound on hot counts. */
const hotCountsMaxStalenessMs = 100;

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

/** How long a readiness report answers every probe of a process. */
export const readinessShareMs = 1_000;
/** How long a reading of the outbox's length serves the readiness reports. */
const outboxSampleMs = 5_000;

export interface ComposeOptions {
  /** Where the readiness counts the checks that fail in each of its reports (an API process's metrics). */
  readonly readinessFailures?: CheckFailures;
}

// eslint-disable-next-line max-lines-per-function -- the composition root: every part in the order each needs the others, wiring and nothing else.
export function compose(config: Config, clients: ComposedClients, logger: Logger, options: ComposeOptions = {}): App {
  const { db, redis } = clients;
  const keys = createRedisKeys(config.redisPartitions);

  const users = createUserStore(db);
  const posts = createPostStore(db);
  const comments = createCommentStore(db);
  const memberPages = createMemberPageStore(db);
  const persistStore = createPersistStore(db);
  const databaseReconcile = createDatabaseReconcileStore(db);
  // Counts kept in an API process's memory while Redis tells it of every write to them; never older than the bound.
  const hotCounts = clients.countInvalidations
    ? new HotCounts({
        invalidations: clients.countInvalidations,
        targetOf: (key) => keys.parseCounters(key),
        maxTargets: config.hotCountsTargets,
        maxStalenessMs: hotCountsMaxStalenessMs,
      })
    : null;
  const memberIndexes = memberIndexesOf(redis, keys);
  const memberIndexLoader = memberIndexes
    ? createMemberIndexLoader({
        indexes: createMemberIndexStore(redis, memberIndexes),
        memberPages,
        onFailure: (err) => logger.warn({ err }, "a member index could not be loaded; feeds look memberships up target by target until it is"),
      })
    : null;
  const counterStore = createCounterStore(redis, keys, {
    ...(hotCounts ? { hotCounts } : {}),
    ...(memberIndexes && memberIndexLoader
      ? { memberIndexes: { indexes: memberIndexes, missing: (relation, type, userId) => memberIndexLoader.missing(relation, type, userId) } }
      : {}),
  });
  const rebuilds = createRebuildStore(redis, keys);
  const redisReconcile = createRedisReconcileStore(redis, keys);
  const listStore = createListStore(redis, keys);
  const rankingStore = createRankingStore(redis, keys);
  const rankings = createRankingRefresher({ store: rankingStore, source: createRankingSource(db), lease: createLease(redis, keys.ranking.lock) });

  const catalog = createCatalog({ users, posts, comments });
  // Empty unless startUserDirectory() fills it: a worker or a reconcile pass authenticates nobody.
  const knownUsers = new KnownUsers();
  const userAnnouncements = createUserAnnouncements(redis, clients.subscriberRedis ?? null, keys);
  const snapshots = createSnapshotStore(db);
  const persistenceWith = composePersistence(
    { redis, persistStore, rebuilds, snapshots, counters: counterStore, lists: listStore, rankings: rankingStore, memberIndexes },
    logger,
  );
  const appending = persistenceWith();
  // Counts from Redis, or PostgreSQL where it holds none; Redis filled in behind reads, within its memory policy.
  const { reachability, warmer, uses, counters, loads, journal, closeJournal } = composeCounts(
    config,
    { db, redis, keys, counterStore, rebuilds, snapshots, catalog, memberIndexes, persist: (changes) => appending.persist(changes) },
    logger,
  );
  const tokens = createTokenService({
    secret: config.jwtSecret,
    ttlSeconds: config.tokenTtlSeconds,
    issuer: config.jwt.issuer,
    audience: config.jwt.audience,
    clockToleranceSeconds: config.jwt.clockToleranceSeconds,
  });
  const rateLimits = composeRateLimits(config, createRateBudgetStore(redis, keys), reachability, logger);
  const services: Services = {
    catalog,
    counters,
    tokens,
    memberships: createMembershipService({
      memberships: createMembershipStore(redis, keys, undefined, hotCounts ?? undefined),
      memberPages,
      counters,
      reachability,
      uses,
      journal,
    }),
    lists: createListService({ lists: listStore, memberPages, reachability }),
    views: createViewService({
      store: createViewStore(redis, keys),
      catalog,
      counters,
      flushEveryMs: config.views.flushIntervalMs,
      flushAtPosts: config.views.flushPosts,
      onFlushFailure: (err) => logger.warn({ err }, "views could not be flushed to Redis; they wait for the next flush"),
      onViewsLost: (views, err) =>
        logger.error({ err, views }, "views given up: Redis did not confirm them in time (a command already sent may still count them, once)"),
    }),
    users: createUserService({
      users,
      tokens,
      counters,
      catalog,
      known: knownUsers,
      announcements: userAnnouncements,
      onAnnounceFailure: (err) => logger.warn({ err }, "a new user could not be announced; other API processes look them up once instead"),
      rateLimits,
      reachability,
    }),
    rateLimits,
    rankings: createRankingService({ store: rankingStore, cacheMs: config.ranking.cacheMs }),
    content: createContentService({
      posts,
      comments,
      counters,
      findPost: (id) => findOne(catalog.posts, id),
      findComment: (id) => findOne(catalog.comments, id),
    }),
    ...(clients.subscriberRedis && {
      live: createLiveCounts({
        changes: createCountChanges(clients.subscriberRedis, keys),
        read: (targets, cold) => counters.read(targets, cold),
        outOfReach: (error) => reachability.failed(error),
        intervalMs: config.live.intervalMs,
        maxPosts: config.live.maxPosts,
        onReadFailure: (err) => logger.warn({ err }, "live counts could not be read from Redis; read again in a second"),
        onListenFailure: (err) => logger.warn({ err }, "Redis did not take an unsubscribe of live counts"),
      }),
    }),
  };

  const openBus = (): MessageBus => {
    if (!clients.rabbit) throw new Error("The message bus needs a RabbitMQ client: open the clients with { rabbit: true }.");
    const topology = createTopology({
      prefix: config.rabbitmq.prefix,
      persistQueues: config.persist.queues,
      queueType: config.rabbitmq.queueType,
      retryDelayMs: config.persist.retryDelayMs,
    });
    return createMessageBus(clients.rabbit, topology, logger, { publishTimeoutMs: config.rabbitmq.publishTimeoutMs });
  };

  const reconcileWith = (bus: MessageBus, onProgress?: (progress: ReconcileProgress) => void) =>
    runReconcile({
      redis: redisReconcile,
      database: databaseReconcile,
      rebuilds,
      publish: (repairs) => bus.publishRepairs(repairs),
      batchSize: config.reconcile.batchSize,
      memberChunk: config.reconcile.memberChunk,
      logger: logger.child({ component: "reconcile" }),
      coldAfterSeconds: config.reconcile.coldAfterSeconds,
      onProgress,
    });

  let directoryStarted = false;

  // Only its length is used here (XLEN of every stream): it opens and reads nothing.
  const backlog = createOutboxStore(redis, keys, { batchSize: config.relay.batchSize });
  const advisories = {
    outbox: outboxBacklog(
      shared(() => backlog.length(), outboxSampleMs),
      config.relay.outboxWarnLength,
    ),
    ...clients.advisories?.(),
  };

  return {
    services,
    isUnavailable: isStoreUnavailable,
    // Shared: one check a second per process whatever the probes' rate; the outbox's length
    // (a sweep of every stream) at most every 5 s.
    readiness: shared(createReadiness(clients.probes?.() ?? {}, config.readinessTimeoutMs, advisories, options.readinessFailures), readinessShareMs),
    rankings,
    hotCounts,
    memberIndexes: memberIndexLoader,
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
    async startPipeline(hooks) {
      if (!clients.relayRedis) throw new Error("The pipeline needs the relay's own Redis client: open the clients with { relay: true }.");
      const bus = openBus();
      const running = await startPipeline(
        {
          outbox: createOutboxStore(clients.relayRedis, keys, { batchSize: config.relay.batchSize }),
          bus,
          persistence: persistenceWith(hooks?.afterDatabaseCommit),
          repairs: createRepairService({ database: databaseReconcile, redis: redisReconcile, counters: counterStore }),
          reconcileLease: createLease(redis, keys.reconcileLock()),
          // A day: far longer than the clocks of two workers differ.
          reconcileTicks: createTickClaims(redis, keys.reconcileTickPrefix(), 86_400_000),
          reconcile: () => reconcileWith(bus),
          databaseAnswers: () =>
            db.$queryRaw`SELECT 1`.then(
              () => true,
              () => false,
            ),
          rankings,
          redisMemory: createMemoryStore(redis, keys),
        },
        config,
        logger,
        hooks,
      );
      return {
        metrics: running.metrics,
        async close() {
          await running.close();
          await bus.close();
        },
      };
    },
    async reconcileOnce(onProgress) {
      const bus = openBus();
      try {
        return await reconcileWith(bus, onProgress);
      } finally {
        await bus.close();
      }
    },
    startUserDirectory() {
      if (directoryStarted) throw new Error("The user directory was started already: start it once per composed app.");
      directoryStarted = true;
      const directoryLogger = logger.child({ component: "user-directory" });
      return startUserDirectory({
        known: knownUsers,
        users,
        announcements: clients.subscriberRedis ? userAnnouncements : null,
        onLoaded: (load) => directoryLogger.info(load, "every existing user is known; their tokens are checked without SQL"),
        onLoadFailure: (err, retryInMs) => directoryLogger.warn({ err, retryInMs }, "existing users could not be read from PostgreSQL; reading again"),
        onListenFailure: (err) => directoryLogger.warn({ err }, "new users cannot be heard of from Redis; each is looked up once instead"),
      });
    },
  };
}
