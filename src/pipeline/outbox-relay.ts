// Moves changes (likes, collects, follows, views) from the Redis outbox to RabbitMQ.
//
// The relay reads the outbox, publishes what it read with publisher confirms,
// and only after the broker confirmed acknowledges the entries, which removes
// them. An entry is therefore removed only once RabbitMQ holds it durably; a
// crash in between leaves it pending, and another relay takes it over once
// nobody kept it for `claimIdleMs`. While RabbitMQ is unreachable, publishing
// fails and entries simply wait in Redis: likes go on. A publish that failed may
// still have reached the broker, so a change can be delivered twice; the persist
// consumer's versions make that harmless.
//
// Takeover must not race a relay that is alive but slow (a publish that outlasts
// `claimIdleMs`): the relay keeps the entries in its hands, refreshing their idle
// time in Redis every third of `claimIdleMs` until they are acknowledged, so only
// entries of a relay that stopped (or of a read whose reply never arrived) ever
// look abandoned. A relay that cannot reach Redis cannot keep its entries either,
// and may then see them taken over and published twice: harmless, as above.
// The publish itself has a deadline too, so a hung publish cannot keep entries forever.
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type { MalformedOutboxEntry, OutboxEntry } from "../domain/model/index.js";
import type { MessageBus, Outbox, OutboxRead } from "../domain/ports/index.js";
import type { PipelineMetrics } from "./metrics.js";
import { backoffMs } from "../domain/backoff.js";

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
  /** Pending entries nobody kept for this long (their relay stopped) are taken over, in milliseconds. */
  readonly claimIdleMs: number;
  /** How long a publish may take before the relay gives up on it and tries again, in milliseconds. */
  readonly publishTimeoutMs?: number;
  /** Outbox length above which growth is logged as a warning. */
  readonly warnLength: number;
}

export interface OutboxRelay {
  /** Finishes the round in hand (its entries are confirmed and acknowledged) and stops. */
  close(): Promise<void>;
}

const isMalformed = (e: OutboxEntry | MalformedOutboxEntry): e is MalformedOutboxEntry => "problem" in e;

type Entry = OutboxEntry | MalformedOutboxEntry;

/** What the relay's loop, its keeper and its close share: whether it stops, and the entries it holds. */
interface RelayState {
  stopping: boolean;
  /** Entries read or claimed and not yet acknowledged: at most one read's worth. */
  inHand: readonly Entry[];
}

async function publish(options: OutboxRelayOptions, good: readonly OutboxEntry[], bad: readonly MalformedOutboxEntry[]): Promise<void> {
  const publishTimeoutMs = options.publishTimeoutMs ?? 30_000;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`the broker did not confirm ${good.length + bad.length} outbox entries within ${publishTimeoutMs} ms`)),
      publishTimeoutMs,
    );
  });
  const work = (async () => {
    for (const e of bad) await options.bus.deadLetter({ partition: e.partition, entryId: e.entryId }, e.problem, "outbox");
    await options.bus.publishChanges(good);
  })();
  try {
    await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

async function relay(options: OutboxRelayOptions, entries: readonly Entry[]): Promise<void> {
  const { outbox, metrics } = options;
  const good = entries.filter((e): e is OutboxEntry => !isMalformed(e));
  const bad = entries.filter(isMalformed);
  await publish(options, good, bad);
  await outbox.acknowledge(entries);
  metrics.eventsPublished.inc(good.length);
  metrics.observePublished(good.map((e) => e.change));
  metrics.deadLettered.inc(bad.length);
}

async function settleMissing({ outbox, logger }: OutboxRelayOptions, read: OutboxRead): Promise<void> {
  if (read.reopened) logger.warn("the outbox was gone (Redis lost its data) and was opened again");
  if (read.missing.length === 0) return;
  logger.warn(
    { missing: read.missing.map((e) => `${e.partition}/${e.entryId}`) },
    "outbox entries were pending but are gone from their stream (deleted or trimmed); acknowledged, nothing to publish",
  );
  await outbox.acknowledge(read.missing);
}

/** Samples the outbox's length into the metrics, warning while it grows past the bound. */
function lengthWatch({ outbox, metrics, logger, warnLength }: OutboxRelayOptions): () => Promise<void> {
  let lastLength = 0;
  return async () => {
    const length = await outbox.length();
    metrics.outboxLength.set(length);
    if (length > warnLength && length > lastLength) {
      logger.warn({ outboxLength: length }, "outbox is growing: changes are waiting for RabbitMQ");
    }
    lastLength = length;
  };
}

/** Refreshes the idle time of the entries in hand every third of `claimIdleMs`, so no other relay takes them over. */
function keepInHand({ outbox, logger, claimIdleMs }: OutboxRelayOptions, state: RelayState): { stop(): Promise<void> } {
  let keeping: Promise<void> | null = null;
  const keeper = setInterval(
    () => {
      if (state.inHand.length === 0 || keeping) return;
      keeping = outbox
        .keep(state.inHand)
        .catch((err: unknown) => logger.warn({ err }, "telling other relays that this one still holds its entries failed"))
        .finally(() => (keeping = null));
    },
    Math.max(1, Math.floor(claimIdleMs / 3)),
  );
  keeper.unref();
  return {
    async stop() {
      clearInterval(keeper);
      await keeping;
    },
  };
}

/** When the relay claims abandoned entries instead of reading new ones. */
interface ClaimSchedule {
  claimNext: boolean;
  nextClaimAt: number;
}

/** The next read: abandoned entries when due (or while a claim left more), else new ones; and whether to linger after it. */
async function nextRead(options: OutboxRelayOptions, schedule: ClaimSchedule): Promise<{ read: OutboxRead; lingerAfter: boolean }> {
  const { outbox, claimIdleMs } = options;
  if (schedule.claimNext || Date.now() >= schedule.nextClaimAt) {
    const read = await outbox.claimAbandoned(claimIdleMs);
    // A stopped relay may have left more than one claim's worth: go on claiming while there is some.
    schedule.claimNext = read.entries.length + read.missing.length > 0 && read.more;
    schedule.nextClaimAt = Date.now() + claimIdleMs / 2;
    return { read, lingerAfter: false };
  }
  const read = await outbox.read();
  return { read, lingerAfter: !read.more && read.entries.length > 0 && read.entries.length < options.batchSize };
}

async function runRelay(options: OutboxRelayOptions, state: RelayState): Promise<void> {
  const watchLength = lengthWatch(options);
  const schedule: ClaimSchedule = { claimNext: false, nextClaimAt: Date.now() + options.claimIdleMs / 2 };
  let failures = 0;
  let nextWatchAt = 0;
  while (!state.stopping) {
    try {
      if (Date.now() >= nextWatchAt) {
        await watchLength();
        nextWatchAt = Date.now() + 5_000;
      }
      let lingerAfter = false;
      if (state.inHand.length === 0) {
        const next = await nextRead(options, schedule);
        lingerAfter = next.lingerAfter;
        state.inHand = next.read.entries;
        await settleMissing(options, next.read);
      }
      while (state.inHand.length > 0 && !state.stopping) {
        await relay(options, state.inHand.slice(0, options.batchSize));
        state.inHand = state.inHand.slice(options.batchSize);
      }
      failures = 0;
      if (lingerAfter && !state.stopping) await sleep(options.lingerMs);
    } catch (err) {
      if (state.stopping) break;
      failures++;
      const delayMs = backoffMs(failures, { firstMs: 100, maxMs: 5_000 });
      options.logger.warn({ err, delayMs }, "relaying the outbox failed; entries stay in Redis and are retried");
      await sleep(delayMs);
    }
  }
}

export async function startOutboxRelay(options: OutboxRelayOptions): Promise<OutboxRelay> {
  await options.outbox.open();
  const state: RelayState = { stopping: false, inHand: [] };
  const keeper = keepInHand(options, state);
  const loop = runRelay(options, state);
  options.logger.info({ reader: options.outbox.reader }, "outbox relay started");
  return {
    async close() {
      state.stopping = true;
      await loop;
      await keeper.stop();
    },
  };
}
