// The persistence pipeline: outbox relay, persist consumers and their metrics,
// built from clients an entry point opened.
import type { Server } from "node:http";
import type { Logger } from "pino";
import type { Connection } from "rabbitmq-client";
import type { Config } from "../config.js";
import type { LikeChange } from "../domain/like-changes.js";
import { createLikePersistence } from "../domain/persistence.js";
import type { Database } from "../stores/postgres/database.js";
import { createPersistedLikeStore } from "../stores/postgres/like-store.js";
import { createEventPublisher, type EventPublisher } from "../stores/rabbitmq/publisher.js";
import { createRepairService } from "../domain/repairs.js";
import { createReconcileDatabaseStore } from "../stores/postgres/reconcile-store.js";
import { createReconcileCacheStore } from "../stores/redis/reconcile-store.js";
import { startCompensationConsumer } from "./compensation-consumer.js";
import { runReconcile, type ReconcileProgress } from "./reconcile.js";
import { scheduleReconcile } from "./reconcile-schedule.js";
import { createTopology } from "../stores/rabbitmq/topology.js";
import type { RedisClient } from "../stores/redis/client.js";
import { createRedisKeys } from "../stores/redis/keys.js";
import { createRebuildStore } from "../stores/redis/rebuild-store.js";
import { createCounterStore } from "../stores/redis/counter-store.js";
import { createPipelineMetrics, serveMetrics, type PipelineMetrics } from "./metrics.js";
import { startOutboxRelay } from "./outbox-relay.js";
import { startPersistConsumer } from "./persist-consumer.js";
import { createTokenBucket } from "./token-bucket.js";

export interface PipelineClients {
  readonly db: Database;
  /** A Redis connection for replaying late changes into rebuilt targets. */
  readonly redis: RedisClient;
  /** A Redis connection for the relay alone: its reads block. */
  readonly relayRedis: RedisClient;
  readonly rabbit: Connection;
}

export interface PipelineHooks {
  /** Runs after a batch committed and before its messages are acked. */
  readonly afterCommit?: (changes: readonly LikeChange[]) => Promise<void>;
}

export interface RunningPipeline {
  readonly metrics: PipelineMetrics;
  /** Stops taking work, flushes and acknowledges the batch in hand, then stops. */
  close(): Promise<void>;
}

/** One reconcile pass over the whole data set; its repairs go out as compensation messages. */
export function reconcileOnce(
  config: Config,
  clients: { db: Database; redis: RedisClient },
  publisher: EventPublisher,
  onProgress?: (progress: ReconcileProgress) => void,
) {
  const keys = createRedisKeys(config.redisPartitions);
  return runReconcile({
    cache: createReconcileCacheStore(clients.redis, keys),
    database: createReconcileDatabaseStore(clients.db),
    rebuilds: createRebuildStore(clients.redis, keys),
    publish: (compensations) => publisher.publishCompensations(compensations),
    batchSize: config.reconcile.batchSize,
    coldAfterSeconds: config.reconcile.coldAfterSeconds,
    onProgress,
  });
}

export async function startPipeline(config: Config, clients: PipelineClients, logger: Logger, hooks: PipelineHooks = {}): Promise<RunningPipeline> {
  const metrics = createPipelineMetrics();
  const topology = createTopology({
    prefix: config.rabbitmq.prefix,
    persistQueues: config.persist.queues,
    queueType: config.rabbitmq.queueType,
  });
  const publisher = createEventPublisher(clients.rabbit, topology);
  const keys = createRedisKeys(config.redisPartitions);
  const consumer = startPersistConsumer({
    connection: clients.rabbit,
    topology,
    publisher,
    persistence: createLikePersistence({
      store: createPersistedLikeStore(clients.db),
      cache: createRebuildStore(clients.redis, keys),
      counters: createCounterStore(clients.redis, keys),
      onCacheFailure: (err) => logger.warn({ err }, "bringing a committed batch into Redis failed"),
    }),
    bucket: createTokenBucket(config.persist.maxEventsPerSecond, config.persist.batchSize),
    metrics,
    logger: logger.child({ part: "persist" }),
    batchSize: config.persist.batchSize,
    lingerMs: config.persist.lingerMs,
    databaseAnswers: () => clients.db.$queryRaw`SELECT 1`.then(() => true, () => false),
    afterCommit: hooks.afterCommit,
  });
  const relay = await startOutboxRelay({
    redis: clients.relayRedis,
    keys,
    publisher,
    metrics,
    logger: logger.child({ part: "relay" }),
    batchSize: config.relay.batchSize,
    claimIdleMs: config.relay.claimIdleMs,
    warnLength: config.relay.outboxWarnLength,
  });
  const repairs = createRepairService({
    database: createReconcileDatabaseStore(clients.db),
    cache: createReconcileCacheStore(clients.redis, keys),
  });
  const compensations = startCompensationConsumer({
    connection: clients.rabbit,
    topology,
    publisher,
    repairs,
    metrics,
    logger: logger.child({ part: "repairs" }),
  });
  const schedule = config.reconcile.cron
    ? scheduleReconcile({
        cron: config.reconcile.cron,
        redis: clients.redis,
        lockKey: keys.reconcileLock(),
        run: () => reconcileOnce(config, clients, publisher),
        logger: logger.child({ part: "reconcile" }),
      })
    : null;
  const metricsServer: Server | null = await serveMetrics(metrics.registry, config.host, config.metricsPort, logger);
  return {
    metrics,
    async close() {
      await schedule?.stop();
      await relay.close();
      await consumer.close();
      await compensations.close();
      await publisher.close();
      await new Promise<void>((resolve) => (metricsServer ? metricsServer.close(() => resolve()) : resolve()));
    },
  };
}
