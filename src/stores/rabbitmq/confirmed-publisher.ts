// Publishing that succeeds only once a queue holds the message: confirms, the
// mandatory flag with the broker's returns watched, and a deadline.
//
// rabbitmq-client resolves a confirmed publish even when no queue was bound for
// it (the broker confirms an unroutable message too), and has no publish
// timeout: a stalled connection leaves the confirm pending until heartbeats give
// up, a minute later. Both would let the relay hang or, worse, delete outbox
// entries that reached no queue.
import { randomUUID } from "node:crypto";
import type { Connection, Envelope, PublisherProps } from "rabbitmq-client";

/** A publish that did not reach a queue, or whose outcome is unknown: the message must be published again. */
export class PublishFailedError extends Error {
  override readonly name = "PublishFailedError";
}

export interface ConfirmedPublisher {
  /**
   * Resolves once the broker confirmed that a queue holds the message. Rejects with
   * PublishFailedError when no queue took it (nothing bound for its routing key) or
   * no confirm came within the deadline; the message may still have been enqueued then.
   */
  send(envelope: Envelope, body: unknown): Promise<void>;
  close(): Promise<void>;
}

export interface ConfirmedPublisherOptions extends Omit<PublisherProps, "confirm" | "onReturn"> {
  /** How long a publish may wait for its confirm (and for the channel to open), in milliseconds. */
  readonly timeoutMs: number;
}

/** Header naming one publish, to match a returned message with the publish it failed. */
const publishIdHeader = "x-publish-id";

export function createConfirmedPublisher(connection: Connection, { timeoutMs, ...props }: ConfirmedPublisherOptions): ConfirmedPublisher {
  const publisher = connection.createPublisher({ ...props, confirm: true });
  const waiting = new Set<string>();
  const returned = new Map<string, string>();
  publisher.on("basic.return", (message) => {
    const id = message.headers?.[publishIdHeader] as unknown;
    if (typeof id === "string" && waiting.has(id)) returned.set(id, `${message.replyCode} ${message.replyText}`);
  });

  return {
    async send(envelope, body) {
      const id = randomUUID();
      const where = `exchange "${envelope.exchange ?? ""}", routing key "${envelope.routingKey ?? ""}"`;
      waiting.add(id);
      let timer: NodeJS.Timeout | undefined;
      try {
        const deadline = new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new PublishFailedError(`RabbitMQ did not confirm a publish to ${where} within ${timeoutMs} ms; it is treated as failed.`)),
            timeoutMs,
          );
        });
        await Promise.race([publisher.send({ ...envelope, mandatory: true, headers: { ...envelope.headers, [publishIdHeader]: id } }, body), deadline]);
        // The broker sends a message's return before its confirm, but the client emits
        // returns on a later turn of the event loop than it resolves confirms: wait one turn.
        await new Promise((resolve) => setImmediate(resolve));
        const reason = returned.get(id);
        if (reason !== undefined) {
          throw new PublishFailedError(`No queue is bound for ${where}: RabbitMQ returned the message (${reason}).`);
        }
      } finally {
        clearTimeout(timer);
        waiting.delete(id);
        returned.delete(id);
      }
    },
    close: () => publisher.close(),
  };
}
