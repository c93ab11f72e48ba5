// Takes changes from RabbitMQ into PostgreSQL in batches: parse and
// validate each message, add it to the shared batch, and ack it only after the
// batch holding it committed. What can never be applied (it does not parse) goes
// to the dead-letter queue with the reason; a database outage is waited out. A
// valid change that PostgreSQL answers but refuses (a constraint, a trigger) is
// never dead-lettered: Redis already holds it, and reconcile cannot bring the
// stores together while PostgreSQL lacks a change Redis made. It goes to the
// retry queue and is applied again after a delay, as long as it takes; its
// version keeps it from undoing anything newer meanwhile. A batch PostgreSQL
// committed but an unreachable Redis did not hear of is retried whole, as an
// outage is: Redis is what failed, not a change.
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type { Change } from "../domain/model/index.js";
import { RedisFollowUpError, type ChangePersistence } from "../domain/persistence.js";
import type { Disposition, MessageBus } from "../domain/ports/index.js";
import { Batcher } from "./batcher.js";
import type { PipelineMetrics } from "./metrics.js";
import type { TokenBucket } from "./token-bucket.js";
import { backoffMs } from "../domain/backoff.js";

export interface PersistConsumerOptions {
  readonly bus: Pick<MessageBus, "consumeChanges">;
  readonly persistence: ChangePersistence;
  readonly bucket: TokenBucket;
  readonly metrics: PipelineMetrics;
  readonly logger: Logger;
  /** Changes in one PostgreSQL transaction at most. */
  readonly batchSize: number;
  /** How long a batch waits to fill, in milliseconds. */
  readonly lingerMs: number;
  /** Whether PostgreSQL answers at all: tells an outage from a change that cannot be applied. */
  readonly databaseAnswers: () => Promise<boolean>;
  /** Runs after a batch was applied to PostgreSQL and Redis and before its messages are acked (tests inject crashes here). */
  readonly afterBatchApplied?: (changes: readonly Change[]) => Promise<void>;
}

export interface PersistConsumer {
  close(): Promise<void>;
}

/** Failed attempts on a database that answers before the batch is split to find the culprit. */
const attemptsBeforeSplit = 3;

export function startPersistConsumer(options: PersistConsumerOptions): PersistConsumer {
  const { persistence, metrics, logger } = options;
  let closing = false;

  async function applyWithRetry(changes: readonly Change[]): Promise<Disposition[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        const applied = await persistence.persist(changes);
        metrics.persistBatches.inc();
        metrics.eventsPersisted.inc(changes.length);
        metrics.observePersisted(changes, applied);
        logger.debug({ changes: changes.length, ...applied }, "batch committed");
        return changes.map(() => "ack");
      } catch (err) {
        if (closing) throw err;
        if (attempt >= attemptsBeforeSplit && !(err instanceof RedisFollowUpError) && (await options.databaseAnswers())) {
          return changes.length === 1 ? [{ retryLater: `the change could not be persisted: ${(err as Error).message}` }] : split(changes);
        }
        const delayMs = backoffMs(attempt, { firstMs: 100, maxMs: 5_000 });
        logger.warn({ err, attempt, delayMs, changes: changes.length }, "persisting a batch failed; retrying");
        await sleep(delayMs);
      }
    }
  }

  /** Applies each change alone, so one that cannot be applied does not hold back the rest. */
  async function split(changes: readonly Change[]): Promise<Disposition[]> {
    const outcomes: Disposition[] = [];
    for (const change of changes) outcomes.push(...(await applyWithRetry([change])));
    return outcomes;
  }

  const batcher = new Batcher<Change, Disposition>({
    maxItems: options.batchSize,
    lingerMs: options.lingerMs,
    // Two transactions in flight: one commits while the next is built and sent.
    concurrency: 2,
    flush: async (changes) => {
      await options.bucket.take(changes.length);
      const outcomes = await applyWithRetry(changes);
      await options.afterBatchApplied?.(changes);
      return outcomes;
    },
  });

  // Messages of a queue in hand at most. The relay's messages carry up to a relay batch
  // each, so this bounds what waits in memory. Once a queue's consumer holds all of
  // them the broker sends it nothing more until some commit, so the batch is cut then
  // rather than lingering: small messages would otherwise cap throughput at this many
  // per linger.
  const messagesInHand = 16;
  const subscription = options.bus.consumeChanges({ concurrency: messagesInHand, onFull: () => batcher.flush() }, async (deliveries) => {
    const dispositions = await Promise.all(
      deliveries.map((delivery): Promise<Disposition> =>
        delivery.kind === "valid" ? batcher.add(delivery.value) : Promise.resolve({ deadLetter: `invalid change: ${delivery.reason}` }),
      ),
    );
    for (const disposition of dispositions) {
      if (disposition === "ack") continue;
      if ("retryLater" in disposition) {
        logger.error({ reason: disposition.retryLater }, "change refused; it is applied again after the retry delay");
        continue;
      }
      metrics.deadLettered.inc();
      logger.error({ reason: disposition.deadLetter }, "change dead-lettered");
    }
    return dispositions;
  });

  return {
    async close() {
      closing = true;
      // Flush the batch in hand first: its handlers are what the consumers wait for.
      await Promise.all([batcher.close(), subscription.close()]);
    },
  };
}
