// When the connections to Redis that served close: a failover or a restart of Redis
// closes them all, and what the old primary acknowledged before was published, or
// is known only to the process that acknowledged it, by then.
import { performance } from "node:perf_hooks";
import type { Cluster, Redis } from "ioredis";
/** A client of the service, standalone or cluster (client.ts). */
type RedisClient = Redis | Cluster;

const connectionLosses = new WeakMap<RedisClient, number>();
const lossListeners = new WeakMap<RedisClient, Set<(atMs: number) => void>>();

/**
 * When a connection of `redis` (any node's, on a cluster) that was serving last closed, on
 * this process's monotonic clock; -Infinity when none has. A failover or a restart of Redis closes them:
 * what the old primary acknowledged before was published by then.
 */
export const lastConnectionLoss = (redis: RedisClient): number => connectionLosses.get(redis) ?? Number.NEGATIVE_INFINITY;

/** Calls `listener` with the moment (as lastConnectionLoss) each time a connection of `redis` that was serving closes; returns what stops it. */
export function onConnectionLoss(redis: RedisClient, listener: (atMs: number) => void): () => void {
  let listeners = lossListeners.get(redis);
  if (!listeners) lossListeners.set(redis, (listeners = new Set()));
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** Notes when a connection that was serving closed; the attempts to connect again that fail after it do not move the moment. */
export function watchConnectionLoss(client: RedisClient, connection: Redis): void {
  let serving = false;
  connection.on("ready", () => (serving = true));
  connection.on("close", () => {
    if (!serving) return;
    serving = false;
    const atMs = performance.now();
    connectionLosses.set(client, atMs);
    for (const listener of lossListeners.get(client) ?? []) listener(atMs);
  });
}

