// The outbox relay on its own, against the test's Redis and RabbitMQ: bounded
// reads, no takeover of a live relay's entries, and entries gone from their stream.
import { Writable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { pino, type Logger } from "pino";
import type { Connection } from "rabbitmq-client";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Config } from "../../../src/config.js";
import type { OutboxEntry } from "../../../src/domain/model/index.js";
import type { MessageBus, Outbox } from "../../../src/domain/ports/index.js";
import { createPipelineMetrics } from "../../../src/pipeline/metrics.js";
import { startOutboxRelay, type OutboxRelay } from "../../../src/pipeline/outbox-relay.js";
import { createRabbitConnection } from "../../../src/stores/rabbitmq/connection.js";
import { createMessageBus } from "../../../src/stores/rabbitmq/message-bus.js";
import { createTopology } from "../../../src/stores/rabbitmq/topology.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { createOutboxStore, relayGroup } from "../../../src/stores/redis/outbox-store.js";
import { clusterNodes, openRedis, privateRedisUrl, silentLogger, testConfig } from "../../support/env.js";
import { eventually } from "../../support/pipeline.js";
import { startTcpProxy } from "../../support/tcp-proxy.js";

const partitions = 16;
const keys = createRedisKeys(partitions);

let redis: RedisClient;
let rabbit: Connection;
let config: Config;
/** Buses opened by the running test, closed after it (an open publisher holds the connection's close). */
const buses: MessageBus[] = [];
/** Relays' own connections, as in the service: their reads block. */
const relayConnections: RedisClient[] = [];

async function outboxOn(
  options: { batchSize: number; blockMs?: number; timeoutMs?: number },
  connect: { clusterNodes?: readonly string[]; url?: string } = {},
): Promise<Outbox> {
  const connection = await openRedis(connect);
  relayConnections.push(connection);
  const outbox = createOutboxStore(connection, keys, options);
  await outbox.open();
  return outbox;
}

beforeAll(async () => {
  redis = await openRedis();
  config = testConfig({ REDIS_PARTITIONS: String(partitions) });
  rabbit = createRabbitConnection(config.amqpUrl, silentLogger);
});
afterAll(async () => {
  await rabbit.close();
  await redis.quit();
});
beforeEach(async () => {
  // Pending entries of an earlier test's relays would be taken over by this test's.
  await redis.flushall();
});
afterEach(async () => {
  await Promise.all(buses.splice(0).map((bus) => bus.close()));
  await Promise.all(relayConnections.splice(0).map((connection) => connection.quit()));
});

let nextTargetId = 1;

/** Appends `count` like changes to partition `partition`'s stream, as the like script writes them; their entry ids. */
async function append(partition: number, count: number): Promise<string[]> {
  const pipeline = redis.pipeline();
  for (let i = 0; i < count; i++) {
    const id = nextTargetId++;
    pipeline.xadd(keys.outboxOf(partition), "*", "t", "post", "i", String(id), "u", "7", "s", "1", "v", String(id), "a", "", "ts", String(Date.now()));
  }
  return ((await pipeline.exec()) ?? []).map(([, id]) => id as string);
}

/** Reads up to `count` new entries of `partition` as reader `consumer`, which then never acknowledges them. */
async function readAs(consumer: string, partition: number, count: number): Promise<string[]> {
  const reply = (await redis.xreadgroup("GROUP", relayGroup, consumer, "COUNT", count, "STREAMS", keys.outboxOf(partition), ">")) as [
    string,
    [string, string[]][],
  ][];
  return (reply[0]?.[1] ?? []).map(([id]) => id);
}

async function waiting(): Promise<{ entries: number; pending: number }> {
  let entries = 0;
  let pending = 0;
  for (const stream of keys.outboxes()) {
    entries += await redis.xlen(stream);
    pending += Number(((await redis.xpending(stream, relayGroup)) as [number])[0]);
  }
  return { entries, pending };
}

interface CountingBus {
  readonly bus: MessageBus;
  /** How often each entry (`partition/entryId`) was published, by this bus. */
  readonly published: Map<string, number>;
  /** Resolves once a publish has begun. */
  readonly publishing: Promise<void>;
}

/** The real message bus, counting what it publishes, each publish taking at least `delayMs`. */
function countingBus(published: Map<string, number>, delayMs = 0, onPublished: (place: string) => void = () => {}): CountingBus {
  const real = createMessageBus(
    rabbit,
    createTopology({ prefix: config.rabbitmq.prefix, persistQueues: 1, queueType: config.rabbitmq.queueType }),
    silentLogger,
    { publishTimeoutMs: config.rabbitmq.publishTimeoutMs },
  );
  buses.push(real);
  let began: () => void = () => {};
  const publishing = new Promise<void>((resolve) => (began = resolve));
  const bus: MessageBus = {
    ...real,
    async publishChanges(entries: readonly OutboxEntry[]) {
      began();
      if (delayMs > 0) await sleep(delayMs);
      await real.publishChanges(entries);
      for (const e of entries) {
        const place = `${e.partition}/${e.entryId}`;
        published.set(place, (published.get(place) ?? 0) + 1);
        onPublished(place);
      }
    },
  };
  return { bus, published, publishing };
}

function relayOn(outbox: Outbox, bus: MessageBus, claimIdleMs: number, logger: Logger = silentLogger): Promise<OutboxRelay> {
  return startOutboxRelay({ outbox, bus, metrics: createPipelineMetrics(), logger, batchSize: 1_000, lingerMs: 10, claimIdleMs, warnLength: 1_000_000 });
}

const placesOf = (partition: number, ids: readonly string[]) => ids.map((id) => `${partition}/${id}`);

describe("outbox relay", () => {
  it("when a skewed backlog waits in every partition, then each read returns at most a batch over all of them, every busy partition gets a share at once, and each entry comes once", async () => {
    const outbox = await outboxOn({ batchSize: 100, blockMs: 10 });
    // Zipf-like: partition p holds about 1,200 / (p + 1) entries.
    const appended = new Set<string>();
    for (let p = 0; p < partitions; p++) for (const place of placesOf(p, await append(p, Math.ceil(1_200 / (p + 1))))) appended.add(place);

    const seen = new Set<string>();
    const largestReads: number[] = [];
    let first: Set<number> | undefined;
    for (let reads = 0; seen.size < appended.size && reads < 1_000; reads++) {
      const { entries, missing } = await outbox.read();
      expect(missing).toEqual([]);
      largestReads.push(entries.length);
      first ??= new Set(entries.map((e) => e.partition));
      for (const e of entries) {
        expect(seen.has(`${e.partition}/${e.entryId}`)).toBe(false);
        seen.add(`${e.partition}/${e.entryId}`);
      }
      await outbox.acknowledge(entries);
    }
    expect(seen).toEqual(appended);
    expect(Math.max(...largestReads)).toBeLessThanOrEqual(100);
    // The first read already took from every partition, not from the biggest alone.
    expect(first?.size).toBe(partitions);
  });

  it("when one relay publishes slower than the takeover time and another relay runs beside it, then no entry is published twice, and a stopped relay's entries are still taken over", async () => {
    const claimIdleMs = 1_500;
    const published = new Map<string, number>();
    const slowOutbox = await outboxOn({ batchSize: 1_000 });
    // A relay that read these and stopped for good.
    const abandoned = await append(3, 20);
    expect(await readAs("stopped-relay", 3, 20)).toHaveLength(20);

    const fresh = [...placesOf(1, await append(1, 30)), ...placesOf(2, await append(2, 30))];
    const slow = countingBus(published, 3 * claimIdleMs);
    const slowRelay = await relayOn(slowOutbox, slow.bus, claimIdleMs);
    await slow.publishing;
    const quickRelay = await relayOn(await outboxOn({ batchSize: 1_000 }), countingBus(published).bus, claimIdleMs);
    try {
      await eventually(
        async () => {
          const left = await waiting();
          return left.entries === 0 && left.pending === 0;
        },
        40_000,
        async () => JSON.stringify(await waiting()),
      );
    } finally {
      await Promise.all([slowRelay.close(), quickRelay.close()]);
    }
    expect(new Set(published.keys())).toEqual(new Set([...fresh, ...placesOf(3, abandoned)]));
    const twice = [...published].filter(([, times]) => times > 1);
    expect(twice).toEqual([]);
  });

  it("when pending entries are gone from their stream, then the relay acknowledges and logs them and goes on relaying later entries", async () => {
    const lines: string[] = [];
    /** Publications and warnings, in the order they happened. */
    const happened: string[] = [];
    const logger = pino(
      { level: "warn" },
      new Writable({
        write: (chunk: Buffer, _, done) => {
          lines.push(chunk.toString());
          happened.push("warning");
          done();
        },
      }),
    );
    const published = new Map<string, number>();
    const outbox = await outboxOn({ batchSize: 1_000 });
    // Read by this very relay, whose reply never came back (a reset connection), then deleted.
    const lost = await append(5, 4);
    expect(await readAs(outbox.reader, 5, 4)).toHaveLength(4);
    await redis.xdel(keys.outboxOf(5), lost[0] as string, lost[1] as string);
    // Read by a relay that stopped, then trimmed away.
    const stopped = await append(6, 3);
    expect(await readAs("stopped-relay", 6, 3)).toHaveLength(3);
    await redis.xdel(keys.outboxOf(6), stopped[0] as string);

    // Own entries whose reply was lost look abandoned only after the takeover time: later entries must not wait for them.
    const relay = await relayOn(outbox, countingBus(published, 0, (place) => happened.push(place)).bus, 2_000, logger);
    const later = placesOf(7, await append(7, 10));
    try {
      const expected = [...placesOf(5, lost.slice(2)), ...placesOf(6, stopped.slice(1)), ...later];
      await eventually(
        async () => expected.every((p) => published.has(p)) && (await waiting()).pending === 0,
        20_000,
        async () => JSON.stringify({ published: [...published.keys()], waiting: await waiting(), log: lines }),
      );
      const more = placesOf(8, await append(8, 5));
      await eventually(
        async () => more.every((p) => published.has(p)),
        20_000,
        () => JSON.stringify([...published.keys()]),
      );
    } finally {
      await relay.close();
    }
    const gone = [...placesOf(5, lost.slice(0, 2)), `6/${stopped[0]}`];
    const firstWarning = happened.indexOf("warning");
    expect(firstWarning).toBeGreaterThan(-1);
    expect(happened.slice(0, firstWarning)).toEqual(expect.arrayContaining(later));
    for (const place of gone) expect(published.has(place)).toBe(false);
    const logged = lines.map((l) => JSON.parse(l) as { msg: string; missing?: string[] }).filter((l) => l.missing);
    expect(logged.flatMap((l) => l.missing)).toEqual(expect.arrayContaining(gone));
  });

  it("when the outbox lives in a Redis Cluster, then relays read, keep and take over entries there, each published once", async () => {
    const cluster = await openRedis({ clusterNodes: clusterNodes() });
    try {
      await Promise.all(keys.outboxes().map((stream) => cluster.del(stream)));
      const published = new Map<string, number>();
      const slowOutbox = await outboxOn({ batchSize: 1_000 }, { clusterNodes: clusterNodes() });
      const appended: string[] = [];
      for (let p = 0; p < partitions; p++) {
        const pipeline = cluster.pipeline();
        for (let i = 0; i < 5; i++)
          pipeline.xadd(keys.outboxOf(p), "*", "t", "post", "i", String(nextTargetId++), "u", "7", "s", "1", "v", "1", "a", "", "ts", String(Date.now()));
        for (const [, id] of (await pipeline.exec()) ?? []) appended.push(`${p}/${id as string}`);
      }
      const slow = countingBus(published, 3_000);
      const slowRelay = await relayOn(slowOutbox, slow.bus, 1_000);
      await slow.publishing;
      const quickRelay = await relayOn(await outboxOn({ batchSize: 1_000 }, { clusterNodes: clusterNodes() }), countingBus(published).bus, 1_000);
      try {
        await eventually(
          async () => appended.every((p) => published.has(p)),
          20_000,
          () => JSON.stringify([...published.keys()]),
        );
      } finally {
        await Promise.all([slowRelay.close(), quickRelay.close()]);
      }
      expect([...published].filter(([, times]) => times > 1)).toEqual([]);
      const left = await Promise.all(keys.outboxes().map((stream) => cluster.xlen(stream)));
      expect(left.reduce((a, b) => a + b, 0)).toBe(0);
    } finally {
      await Promise.all(keys.outboxes().map((stream) => cluster.del(stream)));
      await cluster.quit();
    }
  });

  it("when Redis stalls, then the relay's calls fail within their deadline and are retried, and it relays again once Redis answers", async () => {
    const lines: string[] = [];
    const logger = pino({ level: "warn" }, new Writable({ write: (chunk: Buffer, _, done) => void (lines.push(chunk.toString()), done()) }));
    const redisUrl = new URL(privateRedisUrl());
    const proxy = await startTcpProxy({ host: redisUrl.hostname, port: Number(redisUrl.port) });
    const published = new Map<string, number>();
    try {
      const outbox = await outboxOn({ batchSize: 1_000, blockMs: 200, timeoutMs: 500 }, { url: proxy.url });
      // Reads that Redis ran only after their deadline strand entries in this relay's pending list until the takeover time.
      const relay = await relayOn(outbox, countingBus(published).bus, 3_000, logger);
      try {
        const before = placesOf(9, await append(9, 5));
        await eventually(
          async () => before.every((p) => published.has(p)),
          10_000,
          () => JSON.stringify([...published.keys()]),
        );
        proxy.stall();
        const timedOut = () => lines.some((l) => l.includes("relaying the outbox failed") && l.includes("Command timed out"));
        await eventually(
          async () => timedOut(),
          10_000,
          () => JSON.stringify(lines),
        );
        const during = placesOf(10, await append(10, 5));
        proxy.resume();
        await eventually(
          async () => during.every((p) => published.has(p)),
          20_000,
          () => JSON.stringify([...published.keys()]),
        );
      } finally {
        proxy.resume();
        await relay.close();
      }
    } finally {
      await proxy.close();
    }
    expect([...published].filter(([, times]) => times > 1)).toEqual([]);
  });
});
