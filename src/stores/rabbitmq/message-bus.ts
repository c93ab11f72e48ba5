// RabbitMQ as the service's message bus: publishing with confirms, consuming the
// persist and repair queues, and parking what can never be applied in the
// dead-letter queue. Handlers see model types; wire formats stay in messages.ts.
import type { Logger } from "pino";
import { ConsumerStatus, type Connection, type Consumer } from "rabbitmq-client";
import type { ConsumeOptions, Delivery, Disposition, MessageBus } from "../../domain/ports.js";
import { eventIdOf, parseLikeChange, parseRepair, toLikeChangeMessage, toRepairMessage } from "./messages.js";
import type { QueueDeclaration, Topology } from "./topology.js";

export function createMessageBus(connection: Connection, topology: Topology, logger: Logger): MessageBus {
  const persistQueues = topology.persistQueues.map((_, q) => topology.persistQueue(q));
  const publisher = connection.createPublisher({
    confirm: true,
    // Declared before the first publish: a confirmed message no queue was bound for would be lost.
    exchanges: topology.exchanges,
    queues: [...persistQueues.map((q) => q.queueOptions), topology.deadQueueOptions, topology.repairQueue.queueOptions],
    queueBindings: [...persistQueues.flatMap((q) => q.queueBindings), ...topology.repairQueue.queueBindings],
  });

  const deadLetter = async (body: unknown, reason: string, origin: string) => {
    await publisher.send({ exchange: "", routingKey: topology.deadQueue, durable: true, headers: { "x-reason": reason, "x-origin": origin } }, body);
  };

  /**
   * One consumer on `queue`: every message is parsed, handed to `handle`, and
   * acknowledged once handled, after a trip to the dead-letter queue when the
   * handler says so. A handler that throws has its message requeued and retried;
   * the broker's delivery limit dead-letters a message that never succeeds.
   */
  function consume<T>(
    queue: QueueDeclaration,
    options: ConsumeOptions,
    parse: (body: unknown) => Delivery<T>,
    handle: (delivery: Delivery<T>) => Promise<Disposition>,
  ): Consumer {
    const name = queue.queueOptions.queue as string;
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
        const disposition = await handle(parse(message.body));
        if (disposition !== "ack") await deadLetter(message.body, disposition.deadLetter, name);
        return ConsumerStatus.ACK;
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
    async publishLikeChanges(entries) {
      await Promise.all(
        entries.map((entry) =>
          publisher.send(
            {
              exchange: topology.exchange,
              routingKey: topology.eventRoutingKey(entry.partition),
              durable: true,
              contentType: "application/json",
              messageId: eventIdOf(entry),
            },
            toLikeChangeMessage(entry),
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
    consumeLikeChanges: (options, handle) => subscription(persistQueues.map((queue) => consume(queue, options, parseLikeChange, handle))),
    consumeRepairs: (options, handle) => subscription([consume(topology.repairQueue, options, parseRepair, handle)]),
    close: () => publisher.close(),
  };
}
