// node --expose-gc --import tsx/esm scripts/bench/outbox-relay.ts [-- --entries 200000 --partitions 1024 --batch 1000]
//
// The outbox relay draining a backlog, as after an outage: `entries` changes
// wait in the outbox, spread Zipf-like over the partitions (partition of rank k
// holds a share ∝ 1/k, ranks shuffled), then one relay starts and publishes them
// to RabbitMQ (a vhost of the run's own) until none is left. Prints the relay's
// throughput and its heap while draining (peak above the heap before it started),
// on a private Redis. Run it on two checkouts to compare.
import { execFileSync } from "node:child_process";
import { parseArgs } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import { createPipelineMetrics } from "../../src/pipeline/metrics.js";
import { startOutboxRelay } from "../../src/pipeline/outbox-relay.js";
import { createRabbitConnection } from "../../src/stores/rabbitmq/connection.js";
import { createMessageBus } from "../../src/stores/rabbitmq/message-bus.js";
import { createTopology } from "../../src/stores/rabbitmq/topology.js";
import { createRedisKeys } from "../../src/stores/redis/keys.js";
import { createOutboxStore } from "../../src/stores/redis/outbox-store.js";
import { startPrivateRedis } from "./private-redis.js";
import { freshVhost } from "./rabbitmq.js";

const { values } = parseArgs({
  options: {
    entries: { type: "string", default: "200000" },
    partitions: { type: "string", default: "1024" },
    batch: { type: "string", default: "1000" },
    amqp: { type: "string", default: "amqp://guest:guest@127.0.0.1:5672" },
    // Also collects garbage every 250 ms and reports the largest heap left after a collection:
    // what the relay really holds, rather than garbage V8 had not collected yet. Slows the drain.
    live: { type: "boolean", default: false },
  },
});
const entries = Number(values.entries);
const partitions = Number(values.partitions);
const batchSize = Number(values.batch);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("Run with node --expose-gc, so the heap before the relay starts is measured after a collection.");

/** How many entries each partition holds: ∝ 1/rank, ranks in a random order, summing to `total`. */
function zipfShares(total: number, count: number): number[] {
  const weights = Array.from({ length: count }, (_, k) => 1 / (k + 1));
  const sum = weights.reduce((a, b) => a + b, 0);
  const shares = weights.map((w) => Math.floor((w / sum) * total));
  shares[0] = (shares[0] ?? 0) + total - shares.reduce((a, b) => a + b, 0);
  for (let i = shares.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [shares[i], shares[j]] = [shares[j] as number, shares[i] as number];
  }
  return shares;
}

const redis = await startPrivateRedis();
const vhost = `likes_bench_relay_${process.pid}`;
const rabbit = createRabbitConnection(freshVhost(values.amqp, vhost), pino({ level: "silent" }));
try {
  const keys = createRedisKeys(partitions);
  const shares = zipfShares(entries, partitions);
  process.stderr.write(
    `filling the outbox: ${entries} entries over ${partitions} partitions (largest ${Math.max(...shares)}, ${shares.filter((n) => n > 0).length} not empty) ...\n`,
  );
  let targetId = 1;
  for (let p = 0; p < partitions; p++) {
    for (let done = 0; done < (shares[p] ?? 0); done += 5_000) {
      const pipeline = redis.client.pipeline();
      for (let i = done; i < Math.min(done + 5_000, shares[p] ?? 0); i++) {
        const id = String(targetId++);
        pipeline.xadd(keys.outboxOf(p), "*", "t", "post", "i", id, "u", "7", "s", "1", "v", id, "a", "3", "ts", String(Date.now()));
      }
      await pipeline.exec();
    }
  }

  const bus = createMessageBus(rabbit, createTopology({ prefix: "bench", persistQueues: 1, queueType: "classic" }), pino({ level: "silent" }), {
    publishTimeoutMs: 5_000,
  });
  const outbox = createOutboxStore(redis.client, keys, { batchSize });
  const metrics = createPipelineMetrics();
  gc();
  const heapBefore = process.memoryUsage().heapUsed;
  let peakHeap = heapBefore;
  let peakRss = process.memoryUsage().rss;
  let peakLiveHeap = heapBefore;
  const sampler = setInterval(() => {
    const { heapUsed, rss } = process.memoryUsage();
    peakHeap = Math.max(peakHeap, heapUsed);
    peakRss = Math.max(peakRss, rss);
  }, 5);
  const collector = values.live
    ? setInterval(() => {
        gc();
        peakLiveHeap = Math.max(peakLiveHeap, process.memoryUsage().heapUsed);
      }, 250)
    : undefined;
  const started = performance.now();
  const relay = await startOutboxRelay({
    outbox,
    bus,
    metrics,
    logger: pino({ level: "warn" }),
    batchSize,
    lingerMs: 50,
    claimIdleMs: 30_000,
    warnLength: Number.MAX_SAFE_INTEGER,
  });
  const published = async () => (await metrics.eventsPublished.get()).values[0]?.value ?? 0;
  while ((await published()) < entries) {
    if (performance.now() - started > 600_000) throw new Error(`the relay did not drain the outbox within 10 minutes (${await published()} published)`);
    await sleep(20);
  }
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  clearInterval(collector);
  await relay.close();
  await bus.close();
  const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
  console.log(
    JSON.stringify({
      entries,
      partitions,
      batchSize,
      seconds: Number(seconds.toFixed(2)),
      entriesPerSecond: Math.round(entries / seconds),
      heapBeforeMb: Number(mb(heapBefore)),
      peakHeapAboveMb: Number(mb(peakHeap - heapBefore)),
      ...(values.live ? { peakLiveHeapAboveMb: Number(mb(peakLiveHeap - heapBefore)) } : {}),
      peakRssMb: Number(mb(peakRss)),
    }),
  );
} finally {
  await rabbit.close();
  await redis.stop();
  execFileSync("rabbitmqctl", ["delete_vhost", vhost], { stdio: "pipe" });
}
