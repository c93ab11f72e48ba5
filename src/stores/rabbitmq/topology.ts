// Every exchange, queue and routing key name, and how they are declared.
//
//   <prefix>                       topic exchange, durable
//   <prefix>.event.<q>.batch       routing key of a batch of changes, all of partitions
//                                  whose queue is q (q = partition mod queues)
//   <prefix>.event.<q>.<partition> routing key of a single change (older relays)
//   <prefix>.persist.<q>           queue of changes, bound to <prefix>.event.<q>.*
//   <prefix>.dead                  changes that can never be applied, with the reason
//   <prefix>.repair                routing key of a reconcile repair
//   <prefix>.repairs               queue of reconcile repairs
//   <prefix>.retry.changes         changes PostgreSQL refused: each waits there
//                                  `retryDelayMs`, then moves to <prefix>.persist.retried
//   <prefix>.persist.retried       refused changes due again, consumed beside the persist queues
//   <prefix>.retry.repairs         repairs that failed: each waits `retryDelayMs`, then moves
//                                  back to <prefix>.repairs
//   <prefix>.persist-queues        the deployment's number of persist queues (see partitioning.ts)
//
// A partition always routes to the same queue, batches keep the outbox order of each
// partition, and each queue has a single active consumer, so one target's changes
// are applied in the order they were published.
// Persistence does not depend on that order (changes carry versions); it keeps
// batches from carrying superseded changes.
import type { ConsumerProps } from "rabbitmq-client";

export interface TopologyOptions {
  readonly prefix: string;
  readonly persistQueues: number;
  readonly queueType: "quorum" | "classic";
  /** How long a change PostgreSQL refused waits before it is applied again, in milliseconds; 30 s unless set. */
  readonly retryDelayMs?: number;
}

type QueueDeclare = NonNullable<ConsumerProps["queueOptions"]>;
type ExchangeDeclare = NonNullable<ConsumerProps["exchanges"]>[number];
type QueueBind = NonNullable<ConsumerProps["queueBindings"]>[number];

/** How a queue is declared and bound. */
export interface QueueDeclaration {
  readonly queueOptions: QueueDeclare;
  readonly queueBindings: QueueBind[];
}

export interface Topology {
  readonly exchange: string;
  readonly deadQueue: string;
  readonly persistQueues: readonly string[];
  /** The persist queue (its index) a partition's changes go to. */
  queueOf(partition: number): number;
  eventRoutingKey(partition: number): string;
  /** Routing key of a batch of changes bound for one persist queue. */
  batchRoutingKey(queue: number): string;
  readonly exchanges: ExchangeDeclare[];
  /** Declaration of persist queue `index`, also one of a previous number of queues. */
  persistQueue(index: number): QueueDeclaration;
  readonly deadQueueOptions: QueueDeclare;
  readonly repairRoutingKey: string;
  readonly repairQueue: QueueDeclaration;
  /** Where a refused change waits, and the queue it is consumed from again, whatever the number of persist queues. */
  readonly changeRetryQueue: QueueDeclare;
  readonly retriedChangesQueue: QueueDeclaration;
  /** Where a failed repair waits before it goes back to the repair queue. */
  readonly repairRetryQueue: QueueDeclare;
  /** The marker queue recording the deployment's number of persist queues (see partitioning.ts). */
  readonly partitioningMarker: QueueDeclare;
  /** Name of persist queue `index`, whatever the number of queues this process uses. */
  persistQueueName(index: number): string;
}

/** Deliveries of one message before the broker dead-letters it (quorum queues only). */
export const deliveryLimit = 20;

export function createTopology({ prefix, persistQueues, queueType, retryDelayMs = 30_000 }: TopologyOptions): Topology {
  const exchange = prefix;
  const deadQueue = `${prefix}.dead`;
  const queueArguments = (extra: Record<string, unknown> = {}) => (queueType === "quorum" ? { "x-queue-type": "quorum", ...extra } : extra);
  const persistQueueName = (q: number) => `${prefix}.persist.${q}`;
  const names = Array.from({ length: persistQueues }, (_, q) => persistQueueName(q));
  const retriedChanges = `${prefix}.persist.retried`;
  const repairs = `${prefix}.repairs`;
  // A waiting room: after the delay the broker moves each message to `target`. A quorum queue
  // moves it only once the target took it; a classic one would drop it if the target were gone.
  const retryQueue = (queue: string, target: string): QueueDeclare => ({
    queue,
    durable: true,
    arguments: queueArguments({
      "x-message-ttl": retryDelayMs,
      "x-dead-letter-exchange": "",
      "x-dead-letter-routing-key": target,
      ...(queueType === "quorum" ? { "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish" } : {}),
    }),
  });
  const consumedQueue = (queue: string) => ({
    queue,
    durable: true,
    arguments: queueArguments({
      "x-single-active-consumer": true,
      "x-dead-letter-exchange": "",
      "x-dead-letter-routing-key": deadQueue,
      ...(queueType === "quorum" ? { "x-delivery-limit": deliveryLimit } : {}),
    }),
  });
  return {
    persistQueueName,
    exchange,
    deadQueue,
    persistQueues: names,
    queueOf: (partition) => partition % persistQueues,
    eventRoutingKey: (partition) => `${prefix}.event.${partition % persistQueues}.${partition}`,
    batchRoutingKey: (queue) => `${prefix}.event.${queue}.batch`,
    exchanges: [{ exchange, type: "topic", durable: true }],
    persistQueue: (q) => ({
      queueOptions: consumedQueue(persistQueueName(q)),
      queueBindings: [{ exchange, queue: persistQueueName(q), routingKey: `${prefix}.event.${q}.*` }],
    }),
    deadQueueOptions: { queue: deadQueue, durable: true, arguments: queueArguments() },
    repairRoutingKey: `${prefix}.repair`,
    repairQueue: {
      queueOptions: {
        queue: repairs,
        durable: true,
        arguments: queueArguments({
          "x-dead-letter-exchange": "",
          "x-dead-letter-routing-key": deadQueue,
          ...(queueType === "quorum" ? { "x-delivery-limit": deliveryLimit } : {}),
        }),
      },
      queueBindings: [{ exchange, queue: repairs, routingKey: `${prefix}.repair` }],
    },
    changeRetryQueue: retryQueue(`${prefix}.retry.changes`, retriedChanges),
    retriedChangesQueue: { queueOptions: consumedQueue(retriedChanges), queueBindings: [] },
    repairRetryQueue: retryQueue(`${prefix}.retry.repairs`, repairs),
    // Never bound and never holds a message: its x-max-length is the record. The broker refuses
    // to declare it again with another value, atomically, whoever declares it.
    partitioningMarker: { queue: `${prefix}.persist-queues`, durable: true, arguments: { "x-max-length": persistQueues } },
  };
}
