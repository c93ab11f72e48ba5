// The Redis connections the service opens: the one that serves requests, with the
// checks at start and the clock write deadlines are set on, and those asked for
// beside it (the relay's, the subscriber's, the listeners of counter writes).
import { performance } from "node:perf_hooks";
import { Cluster, Redis, type Command } from "ioredis";
import type { Logger } from "pino";
import type { Config } from "../config.js";
import { closeWithin, type Opening } from "./closers.js";
import { startIndexFence } from "./redis/index-fence.js";
import { createRedisClient, hostAndPort, type RedisClient } from "./redis/client.js";
import { closingClient } from "./redis/connection-losses.js";
import { createCountInvalidations, type CountInvalidations } from "./redis/count-invalidations.js";
import { checkDurability, checkMemoryPolicy, checkRedisVersion, warnOfMissingReplicas } from "./redis/durability.js";
import { askReplicaAcks, replicaAckConnections } from "./redis/replica-acks.js";
import { clockUncertaintyAllowanceMs, watchRedisClock, type RedisClock } from "./redis/redis-clock.js";
import { countersPrefix, createRedisKeys } from "./redis/keys.js";

/**
 * How often the listeners of counter writes ping: how stale, at rest, the newest
 * confirmation of what they heard is (a few ms more under load). Counts kept in
 * memory are served only while it is younger than hot-counts' bound.
 */
const countInvalidationPingMs = 20;

export interface RedisNeeds {
  /** The relay's own Redis connection, for the pipeline. */
  readonly relay?: boolean;
  /** A subscribing Redis connection, for live counts (an API process). */
  readonly subscriber?: boolean;
  /** Connections that hear writes to counter hashes, one per Redis node, for counts kept in memory (an API process). */
  readonly countInvalidations?: boolean;
  /**
   * Whether this process says what it finds of Redis at start (durability, memory policy, clock,
   * replicas) as warnings; default true. Under npm start one API process says them for all, so
   * each is read once. Refusals (production) are said by every process, as errors.
   */
  readonly startWarnings?: boolean;
  /** Called for every command the request-serving Redis client got a reply (or error) to, with its round trip. */
  readonly onRedisCommand?: (command: string, durationMs: number) => void;
}

export interface RedisClients {
  readonly redis: RedisClient;
  /** A Redis connection of the outbox relay's own, since its reads block; null unless asked for. */
  readonly relayRedis: RedisClient | null;
  /** A Redis connection that hears counts change (sharded pub/sub), for live counts; null unless asked for. */
  readonly subscriberRedis: RedisClient | null;
  /** Hears every write to a counter hash, on every Redis node, so counts may be kept in memory; null unless asked for. */
  readonly countInvalidations: CountInvalidations | null;
  /** Redis's clock as measured from this process, which write deadlines are set on. */
  readonly redisClock: RedisClock;
}

const timed = Symbol("timed");

/**
 * Times every command of `client` from the moment it is handed to the connection
 * (alone or in a pipeline) to its reply. ioredis has no per-client hook for this:
 * its diagnostics channel is process-wide and would mix in the relay's blocking reads.
 * A command resent after a reconnect passes through sendCommand again and is timed once.
 */
function timeCommands(client: RedisClient, observe: (command: string, durationMs: number) => void): void {
  const send = client.sendCommand.bind(client) as (command: Command, ...rest: unknown[]) => unknown;
  const wrapped = (command: Command & { [timed]?: true }, ...rest: unknown[]) => {
    if (!command[timed]) {
      command[timed] = true;
      const startedAt = performance.now();
      const done = () => observe(command.name, performance.now() - startedAt);
      command.promise.then(done, done);
    }
    return send(command, ...rest);
  };
  client.sendCommand = wrapped as typeof client.sendCommand;
}

/**
 * The listeners of writes to counter hashes: one connection per Redis node (the
 * server, or every master of a cluster, followed as masters change), each a RESP2
 * connection of its own, since it subscribes.
 */
function listenToCounterWrites(config: Config, redis: RedisClient, logger: Logger): CountInvalidations {
  const clusterNodes = redis instanceof Cluster ? redis : null;
  const url = new URL(config.redisUrl);
  return createCountInvalidations({
    nodes: () =>
      clusterNodes
        ? clusterNodes.nodes("master").map((node) => `${node.options.host ?? "127.0.0.1"}:${node.options.port ?? 6379}`)
        : [`${url.hostname}:${url.port || 6379}`],
    open: (node) => {
      // Credentials and database of the service's own Redis URL; a cluster's nodes share its settings.
      return new Redis({
        ...hostAndPort(node),
        username: url.username || undefined,
        password: url.password ? decodeURIComponent(url.password) : undefined,
        protocol: 2,
        lazyConnect: true,
        enableOfflineQueue: false,
        autoResubscribe: false,
        maxRetriesPerRequest: 0,
        connectionName: "likes-count-invalidations",
      });
    },
    prefix: countersPrefix,
    pingEveryMs: countInvalidationPingMs,
    onProblem: (err, node) => logger.warn({ err, node }, "a listener of counter writes is not listening; counts are read from Redis meanwhile"),
  });
}

/** Says at start what the clock samples found: a refusal of writes, or clocks far apart. */
function warnOfClock(clock: RedisClock, logger: Logger): void {
  const problem = clock.problem();
  if (problem) {
    logger.error(problem);
    return;
  }
  const bounds = clock.bounds();
  const offset = bounds ? Math.round((bounds.lowerMs + bounds.upperMs) / 2) : 0;
  if (Math.abs(offset) > clockUncertaintyAllowanceMs)
    logger.warn(
      { offsetMs: offset },
      `Redis's clock runs ${Math.abs(offset)} ms ${offset > 0 ? "ahead of" : "behind"} this host's. Write deadlines follow Redis's clock as measured, so writes work; keep the clocks synchronized (NTP) all the same, so that logs and metrics of both agree.`,
    );
}

async function connectRedis({ config, logger, signal, closers }: Opening, commandTimeoutMs: number | undefined, subscriber = false): Promise<RedisClient> {
  signal?.throwIfAborted();
  const client = createRedisClient({
    url: config.redisUrl,
    clusterNodes: config.redisClusterNodes,
    sentinels: config.redisSentinels,
    sentinelName: config.redisSentinelName,
    commandTimeoutMs,
    subscriber,
  });
  client.on("error", (err: Error) => logger.warn({ err }, "Redis connection problem"));
  closers.redis.push(() => {
    closingClient(client);
    return closeWithin(
      // Under Sentinels, QUIT leaves ioredis's failover detector subscribed to every Sentinel, reconnecting
      // for as long as the process lives; disconnecting the ended client closes those connections too.
      async () => {
        await client.quit();
        if (config.redisSentinels.length > 0) client.disconnect();
      },
      () => client.disconnect(),
    );
  });
  await client.connect();
  return client;
}

/** The request-serving connection, once Redis passed the checks at start, and the clock measured on it. */
async function openServingRedis(opening: Opening, needs: RedisNeeds): Promise<{ redis: RedisClient; clock: RedisClock }> {
  const { config, logger, closers } = opening;
  const redis = await connectRedis(opening, config.redisCommandTimeoutMs);
  if (needs.onRedisCommand) timeCommands(redis, needs.onRedisCommand);
  await checkRedisVersion(redis);
  // Write deadlines are set on Redis's clock, as measured from here (redis-clock.ts): the first samples before serving.
  const clock = watchRedisClock(redis);
  closers.redis.push(async () => clock.close());
  for (let i = 0; i < 3; i++) await clock.sample();
  // Errors and refusals only, where another process says the warnings.
  const startLogger = needs.startWarnings === false && logger.isLevelEnabled("warn") ? logger.child({}, { level: "error" }) : logger;
  warnOfClock(clock, startLogger);
  const durability = await checkDurability(redis, { policy: config.redisDurability, refuse: config.production, logger: startLogger });
  // Writes that wait for replicas have connections of their own (replica-acks.ts).
  if (config.redisReplicaAcks > 0) {
    const writers = await Promise.all(Array.from({ length: replicaAckConnections }, () => connectRedis(opening, config.redisCommandTimeoutMs)));
    askReplicaAcks(redis, writers, config.redisReplicaAcks);
    warnOfMissingReplicas(durability, config.redisReplicaAcks, startLogger);
  }
  await checkMemoryPolicy(redis, { refuse: config.production, logger: startLogger });
  // Member indexes complete only while every process writing notes them as this version does
  // (index-fence.ts); it leaves the registry before any Redis client closes.
  const fence = await startIndexFence(redis, createRedisKeys(config.redisPartitions).writers(), {
    onMixed: (mixed) =>
      mixed
        ? logger.warn("processes of another version write too: member indexes answer nothing and complete none until one version runs")
        : logger.info("one version writes again: member indexes load and answer again"),
    onFailure: (err) =>
      logger.warn({ err }, "this process could not renew its lease in the writers' registry; its member indexes answer nothing until it does"),
  });
  if (fence) closers.first.push(() => fence.close());
  return { redis, clock };
}

/** The Redis connections `needs` asks for, the request-serving one first. */
export async function openRedisClients(opening: Opening, needs: RedisNeeds): Promise<RedisClients> {
  const { config, logger, closers } = opening;
  const { redis, clock } = await openServingRedis(opening, needs);
  // The relay's reads block, and after an outage one read can return a large backlog that takes
  // longer than a request's timeout to arrive: a timeout there would repeat the same read forever.
  const relayRedis = needs.relay ? await connectRedis(opening, undefined) : null;
  const subscriberRedis = needs.subscriber ? await connectRedis(opening, config.redisCommandTimeoutMs, true) : null;
  // Not under Sentinel: a listener still armed on a primary just demoted hears none of the new
  // primary's writes until it reconnects, and counts kept in memory would be stale meanwhile
  // (seen in test/integration/stores/redis/sentinel.test.ts); every count is read from Redis.
  const keepsCounts = needs.countInvalidations && config.hotCountsTargets > 0 && config.redisSentinels.length === 0;
  const countInvalidations = keepsCounts ? listenToCounterWrites(config, redis, logger) : null;
  // Its connections QUIT with no timeout of their own; the process ending drops whatever did not close.
  if (countInvalidations)
    closers.redis.push(() =>
      closeWithin(
        () => countInvalidations.close(),
        () => {},
      ),
    );
  return { redis, redisClock: clock, relayRedis, subscriberRedis, countInvalidations };
}
