import { Counter, Gauge, Registry, collectDefaultMetrics } from "prom-client";

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
}

export function createPipelineMetrics(): PipelineMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const make = <M>(Metric: new (config: { name: string; help: string; registers: Registry[] }) => M, name: string, help: string) =>
    new Metric({ name, help, registers: [registry] });
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
  };
}
