// The part of the composition root that builds the persistence pipeline and the
// reconcile pass, each on a message bus of its own.
import type { Logger } from "pino";
import type { Config } from "../config.js";
import type { ChangePersistence } from "../domain/persistence.js";
import type { MessageBus } from "../domain/ports/index.js";
import type { RankingRefresher } from "../domain/rankings.js";
import { createRepairService } from "../domain/repairs.js";
import type { AppliedChanges } from "../domain/model/index.js";
import { startPipeline, type PipelineHooks, type RunningPipeline } from "../pipeline/pipeline.js";
import { runReconcile, type ReconcileProgress, type ReconcileSummary } from "../pipeline/reconcile-pass.js";
import { createMessageBus } from "../stores/rabbitmq/message-bus.js";
import { createTopology } from "../stores/rabbitmq/topology.js";
import { createLease, createTickClaims } from "../stores/redis/lease-store.js";
import { createMemoryStore } from "../stores/redis/memory-store.js";
import { createOutboxStore } from "../stores/redis/outbox-store.js";
import type { ComposedClients, ComposedStores } from "./stores.js";
import { reconcileTickClaimMs } from "./tunables.js";

export interface PipelineParts {
  readonly clients: ComposedClients;
  readonly stores: ComposedStores;
  readonly rankings: RankingRefresher;
  /** The change persistence, with a hook right after each PostgreSQL commit. */
  readonly persistenceWith: (afterDatabaseCommit?: (applied: AppliedChanges) => Promise<void>) => ChangePersistence;
}

export interface ComposedPipeline {
  /** Starts the persistence pipeline on its own message bus; closing it closes the bus too. */
  start(hooks?: PipelineHooks): Promise<RunningPipeline>;
  /** One full reconcile pass; its repairs are published for a running pipeline to apply. */
  reconcileOnce(onProgress?: (progress: ReconcileProgress) => void): Promise<ReconcileSummary>;
}

function openBus(config: Config, clients: ComposedClients, logger: Logger): MessageBus {
  if (!clients.rabbit) throw new Error("The message bus needs a RabbitMQ client: open the clients with { rabbit: true }.");
  const topology = createTopology({
    prefix: config.rabbitmq.prefix,
    persistQueues: config.persist.queues,
    queueType: config.rabbitmq.queueType,
    retryDelayMs: config.persist.retryDelayMs,
  });
  return createMessageBus(clients.rabbit, topology, logger, { publishTimeoutMs: config.rabbitmq.publishTimeoutMs });
}

function reconcileWith(config: Config, stores: ComposedStores, bus: MessageBus, logger: Logger, onProgress?: (progress: ReconcileProgress) => void) {
  return runReconcile({
    redis: stores.redisReconcile,
    database: stores.databaseReconcile,
    rebuilds: stores.rebuilds,
    publish: (repairs) => bus.publishRepairs(repairs),
    batchSize: config.reconcile.batchSize,
    memberChunk: config.reconcile.memberChunk,
    logger: logger.child({ component: "reconcile" }),
    coldAfterSeconds: config.reconcile.coldAfterSeconds,
    onProgress,
  });
}

async function start(config: Config, parts: PipelineParts, logger: Logger, hooks?: PipelineHooks): Promise<RunningPipeline> {
  const { clients, stores } = parts;
  if (!clients.relayRedis) throw new Error("The pipeline needs the relay's own Redis client: open the clients with { relay: true }.");
  const bus = openBus(config, clients, logger);
  const running = await startPipeline(
    {
      outbox: createOutboxStore(clients.relayRedis, stores.keys, { batchSize: config.relay.batchSize }),
      bus,
      persistence: parts.persistenceWith(hooks?.afterDatabaseCommit),
      repairs: createRepairService({ database: stores.databaseReconcile, redis: stores.redisReconcile, counters: stores.counterStore }),
      reconcileLease: createLease(clients.redis, stores.keys.reconcileLock()),
      reconcileTicks: createTickClaims(clients.redis, stores.keys.reconcileTickPrefix(), reconcileTickClaimMs),
      reconcile: () => reconcileWith(config, stores, bus, logger),
      databaseAnswers: () =>
        clients.db.$queryRaw`SELECT 1`.then(
          () => true,
          () => false,
        ),
      rankings: parts.rankings,
      redisMemory: createMemoryStore(clients.redis, stores.keys),
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
}

export function composePipeline(config: Config, parts: PipelineParts, logger: Logger): ComposedPipeline {
  return {
    start: (hooks) => start(config, parts, logger, hooks),
    async reconcileOnce(onProgress) {
      const bus = openBus(config, parts.clients, logger);
      try {
        return await reconcileWith(config, parts.stores, bus, logger, onProgress);
      } finally {
        await bus.close();
      }
    },
  };
}
