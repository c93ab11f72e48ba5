// Moves like changes from the Redis outbox streams to RabbitMQ.
//
// The relay reads every partition's stream through the consumer group "relay",
// publishes what it read with publisher confirms, and only after the broker
// confirmed acknowledges and deletes the entries. An entry is therefore removed
// only once RabbitMQ holds it durably; a crash in between leaves it pending, and
// another relay takes it over (XAUTOCLAIM) after `claimIdleMs`. While RabbitMQ is
// unreachable, publishing fails and entries simply wait in Redis: likes go on.
// A publish that failed may still have reached the broker, so a change can be
// delivered twice; the persist consumer's versions make that harmless.
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Cluster } from "ioredis";
import type { Logger } from "pino";
import { toMessage, type LikeChange, type LikeChangeMessage } from "../domain/like-changes.js";
import type { RedisClient } from "../stores/redis/client.js";
import type { RedisKeys } from "../stores/redis/keys.js";
import type { EventPublisher } from "../stores/rabbitmq/publisher.js";
import type { PipelineMetrics } from "./metrics.js";

export const relayGroup = "relay";

export interface OutboxRelayOptions {
  /** A connection of the relay's own: reads block on it. */
  readonly redis: RedisClient;
  readonly keys: RedisKeys;
  readonly publisher: EventPublisher;
  readonly metrics: PipelineMetrics;
  readonly logger: Logger;
  /** Entries read per stream per round at most. */
  readonly batchSize: number;
  /** Pending entries idle this long on another relay are taken over, in milliseconds. */
  readonly claimIdleMs: number;
  /** Outbox length above which growth is logged as a warning. */
  readonly warnLength: number;
  /** How long one read waits for new entries, in milliseconds. */
  readonly blockMs?: number;
}

export interface OutboxRelay {
  /** Finishes the round in hand (its entries are confirmed and acknowledged) and stops. */
  close(): Promise<void>;
}

type StreamReply = [key: string, entries: [id: string, fields: string[]][]][] | null;

interface OutboxEntry {
  readonly stream: string;
  readonly id: string;
  readonly partition: number;
  readonly message: LikeChangeMessage | null;
  readonly problem?: string;
}

function toEntry(stream: string, id: string, fields: string[]): OutboxEntry {
  const partition = Number(/\{(\d+)\}/.exec(stream)?.[1] ?? -1);
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i] as string] = fields[i + 1] as string;
  try {
    const change: LikeChange = {
      target: { type: f.t === "comment" ? "comment" : "post", id: BigInt(f.i ?? "") },
      userId: BigInt(f.u ?? ""),
      authorId: f.a ? BigInt(f.a) : null,
      liked: f.s === "1",
      version: BigInt(f.v ?? ""),
      at: new Date(Number(f.ts)),
    };
    if ((f.t !== "post" && f.t !== "comment") || (f.s !== "0" && f.s !== "1") || Number.isNaN(change.at.getTime())) {
      throw new Error("unexpected field values");
    }
    return { stream, id, partition, message: toMessage(`${partition}-${id}`, change) };
  } catch (err) {
    return { stream, id, partition, message: null, problem: `outbox entry ${stream} ${id} is malformed (${(err as Error).message}): ${JSON.stringify(f)}` };
  }
}

export async function startOutboxRelay(options: OutboxRelayOptions): Promise<OutboxRelay> {
  const { redis, keys, publisher, metrics, logger } = options;
  const consumer = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const streams = keys.outboxes();
  const blockMs = options.blockMs ?? 500;
  let stopping = false;

  /** Creates the consumer group on every stream; again whenever Redis lost them (a flush, a new Redis). */
  const ensureGroups = () =>
    Promise.all(
      streams.map((stream) =>
        redis.xgroup("CREATE", stream, relayGroup, "0", "MKSTREAM").catch((err: Error) => {
          if (!err.message.includes("BUSYGROUP")) throw err;
        }),
      ),
    );
  await ensureGroups();

  /** New entries (">") or this relay's own pending ones ("0"), from every stream. */
  async function read(from: ">" | "0"): Promise<OutboxEntry[]> {
    let replies: StreamReply[];
    if (redis instanceof Cluster) {
      // A cluster refuses one read over keys of many slots: one read per stream, without blocking.
      replies = await Promise.all(
        streams.map((s) => redis.call("XREADGROUP", "GROUP", relayGroup, consumer, "COUNT", options.batchSize, "STREAMS", s, from) as Promise<StreamReply>),
      );
      if (from === ">" && replies.every((r) => !r || r.every(([, e]) => e.length === 0))) await sleep(Math.min(blockMs, 200));
    } else {
      const args = from === ">" ? ["BLOCK", blockMs] : [];
      replies = [
        (await redis.call("XREADGROUP", "GROUP", relayGroup, consumer, "COUNT", options.batchSize, ...args, "STREAMS", ...streams, ...streams.map(() => from))) as StreamReply,
      ];
    }
    return replies.flatMap((reply) => (reply ?? []).flatMap(([stream, entries]) => entries.map(([id, fields]) => toEntry(stream, id, fields))));
  }

  /** Acknowledges and deletes entries the broker now holds; per stream, so it works on a cluster too. */
  async function remove(entries: readonly OutboxEntry[]): Promise<void> {
    const byStream = new Map<string, string[]>();
    for (const e of entries) byStream.set(e.stream, [...(byStream.get(e.stream) ?? []), e.id]);
    await Promise.all(
      [...byStream].map(async ([stream, ids]) => {
        await redis.xack(stream, relayGroup, ...ids);
        await redis.xdel(stream, ...ids);
      }),
    );
  }

  async function relay(entries: readonly OutboxEntry[]): Promise<void> {
    const good = entries.filter((e) => e.message !== null);
    const bad = entries.filter((e) => e.message === null);
    for (const e of bad) await publisher.deadLetter({ stream: e.stream, id: e.id }, e.problem ?? "malformed", "outbox");
    await publisher.publishLikeChanges(good.map((e) => ({ partition: e.partition, message: e.message as LikeChangeMessage })));
    await remove(entries);
    metrics.eventsPublished.inc(good.length);
    metrics.deadLettered.inc(bad.length);
  }

  async function claimAbandoned(): Promise<number> {
    const claimed = await Promise.all(
      streams.map(async (stream) => {
        const reply = (await redis.xautoclaim(stream, relayGroup, consumer, options.claimIdleMs, "0-0", "COUNT", options.batchSize, "JUSTID")) as [string, string[]];
        return reply[1].length;
      }),
    );
    return claimed.reduce((a, b) => a + b, 0);
  }

  let lastLength = 0;
  async function watchLength(): Promise<void> {
    const lengths = await Promise.all(streams.map((s) => redis.xlen(s)));
    const length = lengths.reduce((a, b) => a + b, 0);
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
          if ((await claimAbandoned()) > 0) pendingFirst = true;
          nextClaimAt = Date.now() + options.claimIdleMs / 2;
        }
        const entries = await read(pendingFirst ? "0" : ">");
        if (pendingFirst && entries.length === 0) pendingFirst = false;
        // A backlog comes back in one read; publishing it a batch at a time bounds what is in flight.
        for (let i = 0; i < entries.length && !stopping; i += options.batchSize) {
          await relay(entries.slice(i, i + options.batchSize));
        }
        failures = 0;
      } catch (err) {
        if (stopping) break;
        failures++;
        pendingFirst = true;
        if ((err as Error).message?.includes("NOGROUP")) {
          logger.warn("the outbox consumer groups are gone (Redis lost its data); creating them again");
          await ensureGroups().catch(() => {});
          continue;
        }
        const delayMs = Math.min(5_000, 100 * 2 ** failures);
        logger.warn({ err, delayMs }, "relaying the outbox failed; entries stay in Redis and are retried");
        await sleep(delayMs);
      }
    }
  })();

  logger.info({ consumer, streams: streams.length }, "outbox relay started");
  return {
    async close() {
      stopping = true;
      await loop;
    },
  };
}
