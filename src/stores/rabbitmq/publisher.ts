import type { Connection } from "rabbitmq-client";
import type { LikeChangeMessage } from "../../domain/like-changes.js";
import { toCompensationMessage, type Compensation } from "../../domain/reconcile.js";
import type { Topology } from "./topology.js";

export interface EventPublisher {
  /** Publishes durable messages; resolves once the broker confirmed every one. */
  publishLikeChanges(messages: readonly { partition: number; message: LikeChangeMessage }[]): Promise<void>;
  /** Publishes reconcile repairs; resolves once the broker confirmed every one. */
  publishCompensations(compensations: readonly Compensation[]): Promise<void>;
  /** Parks a message that can never be applied in the dead-letter queue, with the reason. */
  deadLetter(body: unknown, reason: string, origin: string): Promise<void>;
  close(): Promise<void>;
}

export function createEventPublisher(connection: Connection, topology: Topology): EventPublisher {
  const persistQueues = topology.persistQueues.map((_, q) => topology.persistQueue(q));
  const publisher = connection.createPublisher({
    confirm: true,
    // Declared before the first publish: a confirmed message no queue was bound for would be lost.
    exchanges: topology.exchanges,
    queues: [...persistQueues.map((q) => q.queueOptions), topology.deadQueueOptions, topology.compensateQueue.queueOptions],
    queueBindings: [...persistQueues.flatMap((q) => q.queueBindings), ...topology.compensateQueue.queueBindings],
  });
  return {
    async publishLikeChanges(messages) {
      await Promise.all(
        messages.map(({ partition, message }) =>
          publisher.send(
            {
              exchange: topology.exchange,
              routingKey: topology.eventRoutingKey(partition),
              durable: true,
              contentType: "application/json",
              messageId: message.eventId,
            },
            message,
          ),
        ),
      );
    },
    async publishCompensations(compensations) {
      await Promise.all(
        compensations.map((c) =>
          publisher.send(
            { exchange: topology.exchange, routingKey: topology.compensateRoutingKey, durable: true, contentType: "application/json" },
            toCompensationMessage(c),
          ),
        ),
      );
    },
    async deadLetter(body, reason, origin) {
      await publisher.send(
        { exchange: "", routingKey: topology.deadQueue, durable: true, headers: { "x-reason": reason, "x-origin": origin } },
        body,
      );
    },
    close: () => publisher.close(),
  };
}
