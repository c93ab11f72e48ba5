// Moves like changes from the Redis outbox to RabbitMQ.
//
// The relay reads the outbox, publishes what it read with publisher confirms,
// and only after the broker confirmed acknowledges the entries, which removes
// them. An entry is therefore removed only once RabbitMQ holds it durably; a
// crash in between leaves it pending, and another relay takes it over after
// `claimIdleMs`. While RabbitMQ is unreachable, publishing fails and entries
// simply wait in Redis: likes go on. A publish that failed may still have reached
// the broker, so a change can be delivered twice; the persist consumer's
// versions make that harmless.
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type { MalformedOutboxEntry, OutboxEntry } from "../domain/model.js";
import type { MessageBus, Outbox } from "../domain/ports.js";
import type { PipelineMetrics } from "./metrics.js";

export interface OutboxRelayOptions {
  readonly outbox: Outbox;
  readonly bus: MessageBus;
  readonly metrics: PipelineMetrics;
  readonly logger: Logger;
  /** Entries published per confirm round at most. */
  readonly batchSize: number;
  /**
   * After a read of new entries that did not fill a batch, how long to wait for
   * more, in milliseconds. A read names every partition's stream, which costs the
   * relay and Redis far more than a few entries are worth under a steady trickle.
   */
  readonly lingerMs: number;
  /** Pending entries idle this long on another relay are taken over, in milliseconds. */
  readonly claimIdleMs: number;
  /** Outbox length above which growth is logged as a warning. */
  readonly warnLength: number;
}

export interface OutboxRelay {
  /** Finishes the round in hand (its entries are confirmed and acknowledged) and stops. */
  close(): Promise<void>;
}

const isMalformed = (e: OutboxEntry | MalformedOutboxEntry): e is MalformedOutboxEntry => "problem" in e;

export async function startOutboxRelay(options: OutboxRelayOptions): Promise<OutboxRelay> {
  const { outbox, bus, metrics, logger } = options;
  let stopping = false;
  await outbox.open();

  async function relay(entries: readonly (OutboxEntry | MalformedOutboxEntry)[]): Promise<void> {
    const good = entries.filter((e): e is OutboxEntry => !isMalformed(e));
    const bad = entries.filter(isMalformed);
    for (const e of bad) await bus.deadLetter({ partition: e.partition, entryId: e.entryId }, e.problem, "outbox");
    await bus.publishLikeChanges(good);
    await outbox.acknowledge(entries);
    metrics.eventsPublished.inc(good.length);
    metrics.deadLettered.inc(bad.length);
  }

  let lastLength = 0;
  async function watchLength(): Promise<void> {
    const length = await outbox.length();
    metrics.outboxLength.set(length);
    if (length > options.warnLength && length > lastLength) {
      logger.warn({ outboxLength: length }, "outbox is growing: like changes are waiting for RabbitMQ");
    }
    lastLength = length;
  }

  const loop = (async () => {
    // Own pending entries first: those read before a failed publish, or claimed from a dead relay.
    let pendingFirst = true;
    let failures = 0;
    let nextClaimAt = Date.now() + options.claimIdleMs / 2;
    let nextWatchAt = 0;
    while (!stopping) {
      try {
        if (Date.now() >= nextWatchAt) {
          await watchLength();
          nextWatchAt = Date.now() + 5_000;
        }
        if (Date.now() >= nextClaimAt) {
          if ((await outbox.claimAbandoned(options.claimIdleMs)) > 0) pendingFirst = true;
          nextClaimAt = Date.now() + options.claimIdleMs / 2;
        }
        const which = pendingFirst ? "pending" : "new";
        const { entries, reopened } = await outbox.read(which);
        if (reopened) logger.warn("the outbox was gone (Redis lost its data) and was opened again");
        if (pendingFirst && entries.length === 0) pendingFirst = false;
        // A backlog comes back in one read; publishing it a batch at a time bounds what is in flight.
        for (let i = 0; i < entries.length && !stopping; i += options.batchSize) {
          await relay(entries.slice(i, i + options.batchSize));
        }
        failures = 0;
        if (which === "new" && entries.length > 0 && entries.length < options.batchSize && !stopping) await sleep(options.lingerMs);
      } catch (err) {
        if (stopping) break;
        failures++;
        pendingFirst = true;
        const delayMs = Math.min(5_000, 100 * 2 ** failures);
        logger.warn({ err, delayMs }, "relaying the outbox failed; entries stay in Redis and are retried");
        await sleep(delayMs);
      }
    }
  })();

  logger.info({ reader: outbox.reader }, "outbox relay started");
  return {
    async close() {
      stopping = true;
      await loop;
    },
  };
}
