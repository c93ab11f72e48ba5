// The persistence pipeline: outbox relay, persist and repair consumers, the
// reconcile schedule and their metrics, started from the parts compose() built.
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type { Config } from "../config.js";
import type { Change } from "../domain/model/index.js";
import type { ChangePersistence } from "../domain/persistence.js";
import type { Lease, MemoryStore, MessageBus, Outbox, TickClaims } from "../domain/ports/index.js";
import type { RankingRefresher } from "../domain/rankings.js";
import type { RepairService } from "../domain/repairs.js";
import { createPipelineMetrics, type PipelineMetrics } from "./metrics.js";
import { startOutboxRelay } from "./outbox-relay.js";
import { startPersistConsumer } from "./persist-consumer.js";
import { startRankingRefresh, type RankingRefresh } from "./ranking-refresh.js";
import type { ReconcileSummary } from "./reconcile-pass.js";
import { scheduleReconcile } from "./reconcile-schedule.js";
import { startRepairConsumer } from "./repair-consumer.js";
import { createTokenBucket } from "./token-bucket.js";

export interface PipelineParts {
  readonly outbox: Outbox;
  readonly bus: MessageBus;
  readonly persistence: ChangePersistence;
  readonly repairs: RepairService;
  /** Held by the worker running a scheduled reconcile pass. */
  readonly reconcileLease: Lease;
  /** Claimed by the worker that runs a scheduled reconcile tick. */
  readonly reconcileTicks: TickClaims;
  /** One reconcile pass, its repairs published on `bus`. */
  readonly reconcile: () => Promise<ReconcileSummary>;
  /** Whether PostgreSQL answers at all: tells an outage from a change that cannot be applied. */
  readonly databaseAnswers: () => Promise<boolean>;
  /** Sums the hot ranking's windows (and rebuilds it when Redis lost it). */
  readonly rankings?: RankingRefresher;
  /** Redis's memory, reported in the metrics at each scrape. */
  readonly redisMemory?: Pick<MemoryStore, "read">;
}

export type PipelineSettings = Pick<Config, "persist" | "relay" | "reconcile"> & Partial<Pick<Config, "ranking">>;

export interface PipelineHooks {
  /** Runs after a batch was applied to PostgreSQL and Redis, before its messages are acked. */
  readonly afterBatchApplied?: (changes: readonly Change[]) => Promise<void>;
  /** Runs right after PostgreSQL committed a batch, before Redis hears of it (credits, replays, lists). */
  readonly afterDatabaseCommit?: () => Promise<void>;
}

export interface RunningPipeline {
  readonly metrics: PipelineMetrics;
  /** Stops taking work, flushes and acknowledges the batch in hand, then stops. */
  close(): Promise<void>;
}

export async function startPipeline(parts: PipelineParts, settings: PipelineSettings, logger: Logger, hooks: PipelineHooks = {}): Promise<RunningPipeline> {
  const memory = parts.redisMemory;
  const metrics = createPipelineMetrics(memory ? { redisMemory: () => memory.read() } : {});
  // Started once the consumers are; a batch that moved likes of posts has the windows summed again soon after.
  let ranking: RankingRefresh | null = null;
  const persistence: ChangePersistence = {
    async persist(changes) {
      const applied = await parts.persistence.persist(changes);
      if (applied.ranked.buckets.length > 0 || applied.ranked.totals.length > 0) ranking?.nudge();
      return applied;
    },
  };
  const persisting = {
    persistence,
    bucket: createTokenBucket(settings.persist.maxEventsPerSecond, settings.persist.batchSize),
    metrics,
    logger: logger.child({ component: "persist" }),
    batchSize: settings.persist.batchSize,
    lingerMs: settings.persist.lingerMs,
    databaseAnswers: parts.databaseAnswers,
    afterBatchApplied: hooks.afterBatchApplied,
  };
  // Refuses to start when this process would route changes otherwise than the deployment
  // does; after a change of PERSIST_QUEUES, first drains what the old routing left behind.
  for (let previous = await parts.bus.open(); previous !== null; previous = await parts.bus.open()) {
    logger.warn({ queues: previous.queues }, "draining the persist queues of the previous PERSIST_QUEUES before taking over");
    const drain = startPersistConsumer({ ...persisting, bus: previous });
    try {
      while (!(await previous.drained())) await sleep(200);
    } finally {
      await drain.close();
    }
  }
  const consumer = startPersistConsumer({ ...persisting, bus: parts.bus });
  const relay = await startOutboxRelay({
    outbox: parts.outbox,
    bus: parts.bus,
    metrics,
    logger: logger.child({ component: "relay" }),
    batchSize: settings.relay.batchSize,
    lingerMs: settings.relay.lingerMs,
    claimIdleMs: settings.relay.claimIdleMs,
    warnLength: settings.relay.outboxWarnLength,
  });
  const repairs = startRepairConsumer({ bus: parts.bus, repairs: parts.repairs, metrics, logger: logger.child({ component: "repairs" }) });
  ranking = parts.rankings
    ? startRankingRefresh({
        refresher: parts.rankings,
        logger: logger.child({ component: "ranking" }),
        intervalMs: settings.ranking?.refreshMs ?? 10_000,
        minGapMs: settings.ranking?.refreshGapMs ?? 250,
      })
    : null;
  const schedule = settings.reconcile.cron
    ? scheduleReconcile({
        cron: settings.reconcile.cron,
        lease: parts.reconcileLease,
        ticks: parts.reconcileTicks,
        run: parts.reconcile,
        metrics,
        logger: logger.child({ component: "reconcile" }),
      })
    : null;
  return {
    metrics,
    async close() {
      await schedule?.stop();
      await relay.close();
      await consumer.close();
      await repairs.close();
      await ranking?.close();
    },
  };
}
