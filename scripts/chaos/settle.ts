// After a case: wait until the pipeline has nothing left in hand, so the check
// reads stores at rest.
import { setTimeout as sleep } from "node:timers/promises";
import { Cluster } from "ioredis";
import { createRedisKeys } from "../../src/stores/redis/keys.js";
import type { RedisClient } from "./check.js";
import type { RabbitVhost } from "./rabbitmq-vhost.js";

export interface Settling {
  readonly settled: boolean;
  readonly seconds: number;
  /** What was left when it did not settle. */
  readonly left: string;
  /** Messages in the dead-letter queue. */
  readonly deadLettered: number;
}

/** Entries the outbox streams hold now. */
export async function outboxLength(redis: RedisClient, streams: readonly string[]): Promise<number> {
  if (redis instanceof Cluster) {
    // A cluster's pipeline takes keys of one slot only; ioredis batches these by node itself.
    const lengths = await Promise.all(streams.map((s) => redis.xlen(s).catch(() => 0)));
    return lengths.reduce((sum, n) => sum + n, 0);
  }
  const lengths = (await redis.pipeline(streams.map((s) => ["xlen", s])).exec()) ?? [];
  return lengths.reduce((sum, [error, n]) => sum + (error ? 0 : Number(n)), 0);
}

/**
 * Waits until no outbox entry is left in Redis and no message in the case's
 * queues (ready or unacknowledged), seen twice in a row: a relayed change is in
 * a queue before it leaves the outbox, and leaves its queue once committed.
 */
export async function settle(redis: RedisClient, partitions: number, vhost: RabbitVhost, prefix: string, timeoutMs: number): Promise<Settling> {
  const started = Date.now();
  const streams = createRedisKeys(partitions).outboxes();
  let calm = 0;
  let left = "";
  let deadLettered = 0;
  while (Date.now() - started < timeoutMs) {
    try {
      const outbox = await outboxLength(redis, streams);
      const queues = (await vhost.queues()).filter((q) => q.name.startsWith(`${prefix}.`));
      deadLettered = queues.find((q) => q.name === `${prefix}.dead`)?.messages ?? 0;
      const inQueues = queues.filter((q) => q.name !== `${prefix}.dead`).reduce((sum, q) => sum + q.messages, 0);
      left = `${outbox} outbox entries, ${inQueues} messages in queues (${queues.map((q) => `${q.name}=${q.messages}`).join(" ")})`;
      calm = outbox === 0 && inQueues === 0 ? calm + 1 : 0;
      if (calm >= 2) return { settled: true, seconds: (Date.now() - started) / 1000, left: "", deadLettered };
    } catch (error) {
      left = `could not read: ${(error as Error).message}`;
      calm = 0;
    }
    await sleep(500);
  }
  return { settled: false, seconds: (Date.now() - started) / 1000, left, deadLettered };
}
