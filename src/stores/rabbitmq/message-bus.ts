// RabbitMQ as the service's message bus: publishing with confirms, consuming the
// persist and repair queues, parking what can never be applied in the
// dead-letter queue and what PostgreSQL refused in the retry queue. Handlers see
// model types; wire formats stay in messages.ts.
import type { Logger } from "pino";
import { ConsumerStatus, type Connection, type Consumer } from "rabbitmq-client";
import type { Change, OutboxEntry, Repair } from "../../domain/model/index.js";
import type { ConsumeOptions, Delivery, Disposition, MessageBus } from "../../domain/ports/index.js";
import { eventIdOf, parseChanges, parseRepair, toChangeBatchMessage, toRepairMessage } from "./messages.js";
import { createConfirmedPublisher } from "./confirmed-publisher.js";
import { adoptPartitioning, inspect, PartitioningChangeRefusedError } from "./partitioning.js";
import type { QueueDeclaration, Topology } from "./topology.js";

export interface MessageBusOptions {
  /** How long a publish may wait for the broker's confirm before it counts as failed, in milliseconds. */
  readonly publishTimeoutMs: number;
}

// eslint-disable-next-line max-lines-per-function -- the bus's publishers and consumers share one connection and topology in this closure.
export function createMessageBus(connection: Connection, topology: Topology, logger: Logger, options: MessageBusOptions): MessageBus {
  const persistQueues = topology.persistQueues.map((_, q) => topology.persistQueue(q));
  const publisher = createConfirmedPublisher(connection, {
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

  const deadLetter = async (body: unknown, reason: string, origin: string) => {
    await publisher.send({ exchange: "", routingKey: topology.deadQueue, durable: true, headers: { "x-reason": reason, "x-origin": origin } }, body);
  };

  /** Into a retry queue, whose delay passed the broker moves it on to be consumed again. */
  const retryLater = async (body: unknown, retryQueue: string, reason: string, origin: string) => {
    await publisher.send({ exchange: "", routingKey: retryQueue, durable: true, headers: { "x-reason": reason, "x-origin": origin } }, body);
  };

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
    queue: QueueDeclaration,
    retryQueue: string,
    options: ConsumeOptions,
    parse: (body: unknown) => { readonly delivery: Delivery<T>; readonly body: unknown }[],
    handle: (deliveries: readonly Delivery<T>[]) => Promise<Disposition[]>,
  ): Consumer {
    const name = queue.queueOptions.queue as string;
    let inHand = 0;
    const consumer = connection.createConsumer(
      {
        queue: name,
        queueOptions: queue.queueOptions,
        queueBindings: queue.queueBindings,
        exchanges: topology.exchanges,
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
            if ("deadLetter" in disposition) await deadLetter(items[i]?.body, disposition.deadLetter, name);
            else await retryLater(items[i]?.body, retryQueue, disposition.retryLater, name);
          }
          return ConsumerStatus.ACK;
        } finally {
          inHand--;
        }
      },
    );
    consumer.on("error", (err) => logger.warn({ err, queue: name }, "consumer problem; it reconnects"));
    return consumer;
  }

  const subscription = (consumers: readonly Consumer[]) => ({
    async close() {
      await Promise.all(consumers.map((c) => c.close()));
    },
  });

  return {
    async open() {
      const outcome = await adoptPartitioning(connection, topology);
      if (outcome.kind === "kept") return null;
      if (outcome.kind === "changed") {
        logger.warn({ from: outcome.from, to: topology.persistQueues.length }, "the number of persist queues changed; the old queues were empty and unused");
        return null;
      }
      const old = Array.from({ length: outcome.from }, (_, q) => topology.persistQueue(q));
      return {
        queues: outcome.from,
        consumeChanges: (options, handle) =>
          subscription(old.map((queue) => consume<Change>(queue, topology.changeRetryQueue.queue as string, options, parseChanges, handle))),
        async drained() {
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
        },
      };
    },
    async publishChanges(entries) {
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
    },
    async publishRepairs(repairs) {
      await Promise.all(
        repairs.map((repair) =>
          publisher.send(
            { exchange: topology.exchange, routingKey: topology.repairRoutingKey, durable: true, contentType: "application/json" },
            toRepairMessage(repair),
          ),
        ),
      );
    },
    deadLetter,
    consumeChanges: (options, handle) =>
      subscription(
        [...persistQueues, topology.retriedChangesQueue].map((queue) =>
          consume<Change>(queue, topology.changeRetryQueue.queue as string, options, parseChanges, handle),
        ),
      ),
    consumeRepairs: (options, handle) =>
      subscription([
        consume<Repair>(
          topology.repairQueue,
          topology.repairRetryQueue.queue as string,
          options,
          (body) => [{ delivery: parseRepair(body), body }],
          async ([delivery]) => [await handle(delivery as Delivery<Repair>)],
        ),
      ]),
    close: () => publisher.close(),
  };
}
