// RabbitMQ as the service's message bus: publishing with confirms, consuming the
// persist and repair queues, parking what can never be applied in the
// dead-letter queue and what PostgreSQL refused in the retry queue. Handlers see
// model types; wire formats stay in messages.ts.
import type { Logger } from "pino";
import { ConsumerStatus, type Connection, type Consumer } from "rabbitmq-client";
import type { Change, OutboxEntry, Repair } from "../../domain/model/index.js";
import type { ConsumeOptions, Delivery, Disposition, MessageBus, PreviousRouting, Subscription } from "../../domain/ports/index.js";
import { eventIdOf, parseChanges, parseRepair, toChangeBatchMessage, toRepairMessage } from "./messages.js";
import { createConfirmedPublisher, type ConfirmedPublisher } from "./confirmed-publisher.js";
import { adoptPartitioning, inspect, PartitioningChangeRefusedError } from "./partitioning.js";
import type { QueueDeclaration, Topology } from "./topology.js";

export interface MessageBusOptions {
  /** How long a publish may wait for the broker's confirm before it counts as failed, in milliseconds. */
  readonly publishTimeoutMs: number;
}

/** What every function of the bus takes: its connection, topology and logger, and the one publisher they share. */
interface Bus {
  readonly connection: Connection;
  readonly topology: Topology;
  readonly logger: Logger;
  readonly publisher: ConfirmedPublisher;
}

function createBusPublisher(connection: Connection, topology: Topology, persistQueues: readonly QueueDeclaration[], options: MessageBusOptions) {
  return createConfirmedPublisher(connection, {
    timeoutMs: options.publishTimeoutMs,
    // Declared before the first publish and after every reconnect, the partitioning marker
    // first: a process whose PERSIST_QUEUES differs from the deployment's publishes nothing.
    queues: [
      topology.partitioningMarker,
      ...persistQueues.map((q) => q.queueOptions),
      topology.deadQueueOptions,
      topology.repairQueue.queueOptions,
      topology.retriedChangesQueue.queueOptions,
      topology.changeRetryQueue,
      topology.repairRetryQueue,
    ],
    exchanges: topology.exchanges,
    queueBindings: [...persistQueues.flatMap((q) => q.queueBindings), ...topology.repairQueue.queueBindings],
  });
}

async function deadLetter({ publisher, topology }: Bus, body: unknown, reason: string, origin: string): Promise<void> {
  await publisher.send({ exchange: "", routingKey: topology.deadQueue, durable: true, headers: { "x-reason": reason, "x-origin": origin } }, body);
}

/** Into a retry queue, whose delay passed the broker moves it on to be consumed again. */
async function retryLater({ publisher }: Bus, body: unknown, retryQueue: string, reason: string, origin: string): Promise<void> {
  await publisher.send({ exchange: "", routingKey: retryQueue, durable: true, headers: { "x-reason": reason, "x-origin": origin } }, body);
}

/**
 * One consumer on `queue`: every message is parsed into its items, handed to
 * `handle`, and acknowledged once handled, after each item the handler refuses
 * went to the dead-letter queue alone. A handler that throws has its message
 * requeued and retried; the broker's delivery limit dead-letters a message that
 * never succeeds. An item the handler asks to retry later goes alone to `retryQueue`,
 * and comes back to be consumed after the delay. Once the consumer holds
 * `concurrency` messages, `onFull` is told.
 */
function consume<T>(
  bus: Bus,
  queue: QueueDeclaration,
  retryQueue: string,
  options: ConsumeOptions,
  parse: (body: unknown) => { readonly delivery: Delivery<T>; readonly body: unknown }[],
  handle: (deliveries: readonly Delivery<T>[]) => Promise<Disposition[]>,
): Consumer {
  const name = queue.queueOptions.queue as string;
  let inHand = 0;
  const consumer = bus.connection.createConsumer(
    {
      queue: name,
      queueOptions: queue.queueOptions,
      queueBindings: queue.queueBindings,
      exchanges: bus.topology.exchanges,
      qos: { prefetchCount: options.concurrency },
      concurrency: options.concurrency,
      requeue: true,
    },
    async (message) => {
      inHand++;
      try {
        const items = parse(message.body);
        const pending = handle(items.map((item) => item.delivery));
        if (inHand >= options.concurrency) options.onFull?.();
        const dispositions = await pending;
        for (const [i, disposition] of dispositions.entries()) {
          if (disposition === "ack") continue;
          if ("deadLetter" in disposition) await deadLetter(bus, items[i]?.body, disposition.deadLetter, name);
          else await retryLater(bus, items[i]?.body, retryQueue, disposition.retryLater, name);
        }
        return ConsumerStatus.ACK;
      } finally {
        inHand--;
      }
    },
  );
  consumer.on("error", (err) => bus.logger.warn({ err, queue: name }, "consumer problem; it reconnects"));
  return consumer;
}

const subscription = (consumers: readonly Consumer[]): Subscription => ({
  async close() {
    await Promise.all(consumers.map((c) => c.close()));
  },
});

/** One consumer of changes on each of `queues`, their refused changes retried through the change retry queue. */
const consumeChanges = (
  bus: Bus,
  queues: readonly QueueDeclaration[],
  options: ConsumeOptions,
  handle: (deliveries: readonly Delivery<Change>[]) => Promise<Disposition[]>,
) => subscription(queues.map((queue) => consume<Change>(bus, queue, bus.topology.changeRetryQueue.queue as string, options, parseChanges, handle)));

const consumeRepairs = (bus: Bus, options: ConsumeOptions, handle: (delivery: Delivery<Repair>) => Promise<Disposition>) =>
  subscription([
    consume<Repair>(
      bus,
      bus.topology.repairQueue,
      bus.topology.repairRetryQueue.queue as string,
      options,
      (body) => [{ delivery: parseRepair(body), body }],
      async ([delivery]) => [await handle(delivery as Delivery<Repair>)],
    ),
  ]);

async function drained({ connection }: Bus, old: readonly QueueDeclaration[]): Promise<boolean> {
  for (const queue of old) {
    const name = queue.queueOptions.queue as string;
    const state = await inspect(connection, name);
    if (state && state.consumerCount > 1) {
      throw new PartitioningChangeRefusedError(
        `While this process drained queue "${name}", another process started consuming it; run one process at a time until the change is done.`,
      );
    }
    if (state && state.messageCount > 0) return false;
  }
  return true;
}

async function open(bus: Bus): Promise<PreviousRouting | null> {
  const { connection, topology, logger } = bus;
  const outcome = await adoptPartitioning(connection, topology);
  if (outcome.kind === "kept") return null;
  if (outcome.kind === "changed") {
    logger.warn({ from: outcome.from, to: topology.persistQueues.length }, "the number of persist queues changed; the old queues were empty and unused");
    return null;
  }
  const old = Array.from({ length: outcome.from }, (_, q) => topology.persistQueue(q));
  return {
    queues: outcome.from,
    consumeChanges: (options, handle) => consumeChanges(bus, old, options, handle),
    drained: () => drained(bus, old),
  };
}

async function publishChanges({ publisher, topology }: Bus, entries: readonly OutboxEntry[]): Promise<void> {
  // One message per persist queue, its entries in outbox order (so per partition too).
  const byQueue = new Map<number, OutboxEntry[]>();
  for (const entry of entries) {
    const queue = topology.queueOf(entry.partition);
    const group = byQueue.get(queue);
    if (group) group.push(entry);
    else byQueue.set(queue, [entry]);
  }
  await Promise.all(
    [...byQueue].map(([queue, group]) =>
      publisher.send(
        {
          exchange: topology.exchange,
          routingKey: topology.batchRoutingKey(queue),
          durable: true,
          contentType: "application/json",
          // Names the batch in logs and the broker's tools; not unique enough to deduplicate on
          // (a batch published again after a failed confirm may be cut differently).
          messageId: `${eventIdOf(group[0] as OutboxEntry)}+${group.length}`,
        },
        toChangeBatchMessage(group),
      ),
    ),
  );
}

async function publishRepairs({ publisher, topology }: Bus, repairs: readonly Repair[]): Promise<void> {
  await Promise.all(
    repairs.map((repair) =>
      publisher.send(
        { exchange: topology.exchange, routingKey: topology.repairRoutingKey, durable: true, contentType: "application/json" },
        toRepairMessage(repair),
      ),
    ),
  );
}

export function createMessageBus(connection: Connection, topology: Topology, logger: Logger, options: MessageBusOptions): MessageBus {
  const persistQueues = topology.persistQueues.map((_, q) => topology.persistQueue(q));
  const bus: Bus = { connection, topology, logger, publisher: createBusPublisher(connection, topology, persistQueues, options) };
  return {
    open: () => open(bus),
    publishChanges: (entries) => publishChanges(bus, entries),
    publishRepairs: (repairs) => publishRepairs(bus, repairs),
    deadLetter: (body, reason, origin) => deadLetter(bus, body, reason, origin),
    consumeChanges: (options, handle) => consumeChanges(bus, [...persistQueues, topology.retriedChangesQueue], options, handle),
    consumeRepairs: (options, handle) => consumeRepairs(bus, options, handle),
    close: () => bus.publisher.close(),
  };
}
