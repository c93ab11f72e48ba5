// Prometheus metrics of the pipeline: the outbox and the relay, persistence, dead
// letters, reconcile passes, and Redis's memory. Everything here is recorded per
// batch or per pass, or read at scrape time: nothing costs the like path a Redis
// round trip.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { relations, type AppliedChanges, type Change } from "../domain/model/index.js";
import type { MemoryReading } from "../domain/ports/index.js";
import { noDifferences } from "./reconcile-tally.js";

export interface PipelineMetrics {
  readonly registry: Registry;
  readonly outboxLength: Gauge;
  readonly eventsPublished: Counter;
  readonly eventsPersisted: Counter;
  readonly persistBatches: Counter;
  readonly deadLettered: Counter;
  readonly reconcileInFlight: Gauge;
  readonly reconcileStuck: Gauge;
  readonly reconcileRebuiltBehind: Counter;
  readonly reconcileDifferences: Counter<"kind">;
  readonly reconcilePasses: Counter<"outcome">;
  /** Records changes the broker confirmed: how long after they were made in Redis. */
  readonly observePublished: (changes: readonly Change[]) => void;
  /**
   * Records a committed batch: its size and each change's lag, and what it changed in
   * PostgreSQL by relation (changes newer than what PostgreSQL held, and the views added),
   * so that a redelivered batch counts its lag and nothing twice.
   */
  readonly observePersisted: (changes: readonly Change[], applied: Pick<AppliedChanges, "passed" | "deltas">) => void;
}

export interface PipelineMetricsOptions {
  /** Reads Redis's memory (INFO memory), at each scrape; without it the Redis memory gauges stay at 0. */
  readonly redisMemory?: () => Promise<MemoryReading>;
}

/** Seconds from a change made in Redis to a step of its way: a relay round (tens of ms) up to an outage of an hour. */
const lagBuckets = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
/** Changes per PostgreSQL transaction: one alone (a split batch) up to PERSIST_BATCH_SIZE's largest sensible values. */
const batchBuckets = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000];

function publishedObserver(registry: Registry): PipelineMetrics["observePublished"] {
  const relayLag = new Histogram({
    name: "likes_relay_lag_seconds",
    help: "Changes the broker confirmed, by how long after they were made in Redis (Redis's clock against the worker's)",
    buckets: lagBuckets,
    registers: [registry],
  });
  return (changes) => {
    const now = Date.now();
    for (const change of changes) relayLag.observe((now - change.at.getTime()) / 1000);
  };
}

/** Adds what a batch changed in PostgreSQL, by relation and action, to `changesPersisted`. */
function countApplied(changesPersisted: Counter<"relation" | "action">, applied: Pick<AppliedChanges, "passed" | "deltas">): void {
  // Summed per label pair first: a batch of a thousand likes is then one labelled increment, not a thousand.
  const moved = new Map<string, { relation: string; action: string; n: number }>();
  const add = (relation: string, action: string, n: number) => {
    const entry = moved.get(`${relation}/${action}`) ?? moved.set(`${relation}/${action}`, { relation, action, n: 0 }).get(`${relation}/${action}`);
    if (entry) entry.n += n;
  };
  for (const change of applied.passed) add(change.relation, change.member ? "add" : "remove", 1);
  for (const { target, name, delta } of applied.deltas) if (target.type === "post" && name === "read" && delta > 0) add("view", "add", delta);
  for (const { relation, action, n } of moved.values()) changesPersisted.inc({ relation, action }, n);
}

function persistedObserver(registry: Registry): PipelineMetrics["observePersisted"] {
  const persistLag = new Histogram({
    name: "likes_persist_lag_seconds",
    help: "Changes committed to PostgreSQL, by how long after they were made in Redis (Redis's clock against the worker's)",
    buckets: lagBuckets,
    registers: [registry],
  });
  const batchSize = new Histogram({
    name: "likes_persist_batch_changes",
    help: "Changes per PostgreSQL transaction that committed",
    buckets: batchBuckets,
    registers: [registry],
  });
  const changesPersisted = new Counter({
    name: "likes_changes_persisted_total",
    help: 'Likes, collects and follows (action "add" or "remove") PostgreSQL applied, newer than what it held, and views it added, by relation',
    labelNames: ["relation", "action"] as const,
    registers: [registry],
  });
  // Every series from the start: a series first seen at a non-zero value shows no increase in PromQL.
  for (const relation of Object.keys(relations)) for (const action of ["add", "remove"]) changesPersisted.inc({ relation, action }, 0);
  changesPersisted.inc({ relation: "view", action: "add" }, 0);
  return (changes, applied) => {
    const now = Date.now();
    batchSize.observe(changes.length);
    for (const change of changes) persistLag.observe((now - change.at.getTime()) / 1000);
    countApplied(changesPersisted, applied);
  };
}

function reconcileCounters(registry: Registry): Pick<PipelineMetrics, "reconcileDifferences" | "reconcilePasses"> {
  const reconcileDifferences = new Counter({
    name: "likes_reconcile_differences_total",
    help: "Differences reconcile passes found between Redis and PostgreSQL, by kind",
    labelNames: ["kind"] as const,
    registers: [registry],
  });
  const reconcilePasses = new Counter({
    name: "likes_reconcile_passes_total",
    help: 'Reconcile passes this worker ran, by outcome ("finished" or "failed")',
    labelNames: ["outcome"] as const,
    registers: [registry],
  });
  // Every series from the start, as likes_changes_persisted_total's.
  for (const kind of Object.keys(noDifferences())) reconcileDifferences.inc({ kind }, 0);
  for (const outcome of ["finished", "failed"]) reconcilePasses.inc({ outcome }, 0);
  return { reconcileDifferences, reconcilePasses };
}

function redisMemoryGauges(registry: Registry, redisMemory: PipelineMetricsOptions["redisMemory"]): void {
  // Both gauges of a scrape share one reading; a reading that fails leaves the last values.
  let memory: { readonly at: number; readonly reading: Promise<MemoryReading | null> } | null = null;
  const readMemory = () => {
    if (!memory || Date.now() - memory.at > 1_000) memory = { at: Date.now(), reading: redisMemory?.().catch(() => null) ?? Promise.resolve(null) };
    return memory.reading;
  };
  const memoryGauge = (name: string, help: string, pick: (reading: MemoryReading) => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        const reading = await readMemory();
        if (reading) this.set(pick(reading));
      },
    });
  memoryGauge("likes_redis_memory_used_bytes", "Redis's used_memory (of its fullest master on a cluster), read at scrape time", (r) => r.usedBytes);
  memoryGauge("likes_redis_maxmemory_bytes", "Redis's maxmemory (of its fullest master on a cluster); 0 when it has no limit", (r) => r.maxBytes);
}

export function createPipelineMetrics(options: PipelineMetricsOptions = {}): PipelineMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const make = <M>(Metric: new (config: { name: string; help: string; registers: Registry[] }) => M, name: string, help: string) =>
    new Metric({ name, help, registers: [registry] });
  const observePublished = publishedObserver(registry);
  const observePersisted = persistedObserver(registry);
  const reconcile = reconcileCounters(registry);
  redisMemoryGauges(registry, options.redisMemory);

  return {
    registry,
    outboxLength: make(Gauge, "likes_outbox_length", "Changes (likes, collects, follows, views) waiting in the Redis outbox streams"),
    eventsPublished: make(Counter, "likes_events_published_total", "Changes published to RabbitMQ and confirmed"),
    eventsPersisted: make(Counter, "likes_events_persisted_total", "Changes committed to PostgreSQL"),
    persistBatches: make(Counter, "likes_persist_batches_total", "PostgreSQL transactions that committed changes"),
    deadLettered: make(Counter, "likes_dead_lettered_total", "Messages parked in the dead-letter queue"),
    reconcileInFlight: make(Gauge, "likes_reconcile_in_flight_targets", "Targets the last reconcile pass could not compare: Redis ahead of PostgreSQL"),
    reconcileStuck: make(Gauge, "likes_reconcile_stuck_targets", "Targets in flight without progress for several reconcile passes in a row"),
    reconcileRebuiltBehind: make(
      Counter,
      "likes_reconcile_rebuilt_behind_total",
      "Targets whose Redis lacked changes PostgreSQL had, taken out of Redis to be rebuilt",
    ),
    ...reconcile,
    observePublished,
    observePersisted,
  };
}
