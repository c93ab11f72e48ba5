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

/**
 * Connects a client under Sentinels again after ioredis 6.0.0 ended it by a race: its
 * failover detector drops the connection as the Sentinels announce a new primary, and
 * when the client is already reconnecting then (the old primary died first), the
 * connect gives up with "Connection is closed." and the client stays ended, every
 * command failing (redis/ioredis#1683). Seen in the fault suite's sentinel-failover:
 * one API process of two answered nothing from Redis until it stopped. A close the
 * service asked for is not one: ioredis keeps that error to itself while closing.
 */
export function reconnectAfterSentinelRace(client: Redis, retryMs = 100): void {
  let raced = false;
  client.on("error", (error: unknown) => {
    if (client.status === "connecting" && (error as Error)?.message === "Connection is closed.") raced = true;
  });
  client.on("end", () => {
    if (!raced || closing.has(client)) return;
    raced = false;
    setTimeout(() => {
      if (!closing.has(client)) client.connect().catch(() => {});
    }, retryMs).unref();
  });
}

const closing = new WeakSet<RedisClient>();

/** Tells that the service closes `client`: no race is answered by connecting it again (a QUIT queued while it reconnects fails the same way). */
export function closingClient(client: RedisClient): void {
  closing.add(client);
}
