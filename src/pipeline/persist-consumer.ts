// Takes like changes from RabbitMQ into PostgreSQL in batches: parse and
// validate each message, add it to the shared batch, and ack it only after the
// batch holding it committed. What can never be applied goes to the dead-letter
// queue with the reason; a database outage is waited out, never dead-lettered.
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { ConsumerStatus, type Connection, type Consumer } from "rabbitmq-client";
import { parseLikeChange, type LikeChange } from "../domain/like-changes.js";
import type { LikePersistence } from "../domain/persistence.js";
import type { EventPublisher } from "../stores/rabbitmq/publisher.js";
import type { Topology } from "../stores/rabbitmq/topology.js";
import { Batcher } from "./batcher.js";
import type { PipelineMetrics } from "./metrics.js";
import type { TokenBucket } from "./token-bucket.js";

type Outcome = "applied" | { readonly deadLetter: string };

export interface PersistConsumerOptions {
  readonly connection: Connection;
  readonly topology: Topology;
  readonly publisher: EventPublisher;
  readonly persistence: LikePersistence;
  readonly bucket: TokenBucket;
  readonly metrics: PipelineMetrics;
  readonly logger: Logger;
  /** Changes in one PostgreSQL transaction at most. */
  readonly batchSize: number;
  /** How long a batch waits to fill, in milliseconds. */
  readonly lingerMs: number;
  /** Whether PostgreSQL answers at all: tells an outage from a change that cannot be applied. */
  readonly databaseAnswers: () => Promise<boolean>;
  /** Runs after a batch committed and before its messages are acked (tests inject crashes here). */
  readonly afterCommit?: (changes: readonly LikeChange[]) => Promise<void>;
}

export interface PersistConsumer {
  close(): Promise<void>;
}

/** Failed attempts on a database that answers before the batch is split to find the culprit. */
const attemptsBeforeSplit = 3;

export function startPersistConsumer(options: PersistConsumerOptions): PersistConsumer {
  const { persistence, metrics, logger } = options;
  let closing = false;

  async function applyWithRetry(changes: readonly LikeChange[]): Promise<Outcome[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        const applied = await persistence.persist(changes);
        metrics.persistBatches.inc();
        metrics.eventsPersisted.inc(changes.length);
        logger.debug({ changes: changes.length, ...applied }, "batch committed");
        return changes.map(() => "applied");
      } catch (err) {
        if (closing) throw err;
        if (attempt >= attemptsBeforeSplit && (await options.databaseAnswers())) {
          return changes.length === 1 ? [{ deadLetter: `PostgreSQL refused the change: ${(err as Error).message}` }] : split(changes);
        }
        const delayMs = Math.min(5_000, 100 * 2 ** attempt);
        logger.warn({ err, attempt, delayMs, changes: changes.length }, "persisting a batch failed; retrying");
        await sleep(delayMs);
      }
    }
  }

  /** Applies each change alone, so one that cannot be applied does not hold back the rest. */
  async function split(changes: readonly LikeChange[]): Promise<Outcome[]> {
    const outcomes: Outcome[] = [];
    for (const change of changes) outcomes.push(...(await applyWithRetry([change])));
    return outcomes;
  }

  const batcher = new Batcher<LikeChange, Outcome>({
    maxItems: options.batchSize,
    lingerMs: options.lingerMs,
    // Two transactions in flight: one commits while the next is built and sent.
    concurrency: 2,
    flush: async (changes) => {
      await options.bucket.take(changes.length);
      const outcomes = await applyWithRetry(changes);
      await options.afterCommit?.(changes);
      return outcomes;
    },
  });

  async function deadLetter(body: unknown, reason: string, queue: string): Promise<void> {
    await options.publisher.deadLetter(body, reason, queue);
    metrics.deadLettered.inc();
    logger.error({ reason, queue }, "message dead-lettered");
  }

  const consumers: Consumer[] = options.topology.persistQueues.map((queue, q) => {
    const declared = options.topology.persistQueue(q);
    return options.connection.createConsumer(
      {
        queue,
        queueOptions: declared.queueOptions,
        queueBindings: declared.queueBindings,
        exchanges: options.topology.exchanges,
        // Two batches' worth: one filling while the previous commits.
        qos: { prefetchCount: options.batchSize * 2 },
        concurrency: options.batchSize * 2,
        requeue: true,
      },
      async (message) => {
        const parsed = parseLikeChange(message.body);
        if ("invalid" in parsed) {
          await deadLetter(message.body, `invalid like change: ${parsed.invalid}`, queue);
          return ConsumerStatus.ACK;
        }
        const outcome = await batcher.add(parsed.change);
        if (outcome !== "applied") await deadLetter(message.body, outcome.deadLetter, queue);
        return ConsumerStatus.ACK;
      },
    );
  });
  for (const consumer of consumers) consumer.on("error", (err) => logger.warn({ err }, "persist consumer problem"));

  return {
    async close() {
      closing = true;
      // Flush the batch in hand first: its handlers are what the consumers wait for.
      await Promise.all([batcher.close(), ...consumers.map((c) => c.close())]);
    },
  };
}
