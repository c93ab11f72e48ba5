// Every connection the service opens, in one place, and one close for them all.
import { performance } from "node:perf_hooks";
import { Cluster, Redis, type Command } from "ioredis";
import type { Logger } from "pino";
import type { Connection } from "rabbitmq-client";
import type { Config } from "../config.js";
import { createDatabase, isPostgresUnavailable, type Database } from "./postgres/database.js";
import { createRabbitConnection } from "./rabbitmq/connection.js";
import { startIndexFence } from "./redis/index-fence.js";
import { createRedisClient, hostAndPort, isRedisUnavailable, type RedisClient } from "./redis/client.js";
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

/** Whether an error says a store did not answer in time or could not be reached: the request may be retried. */
export const isStoreUnavailable = (error: unknown): boolean => isRedisUnavailable(error) || isPostgresUnavailable(error);

export interface Clients {
  readonly db: Database;
  readonly redis: RedisClient;
  /** A Redis connection of the outbox relay's own, since its reads block; null unless asked for. */
  readonly relayRedis: RedisClient | null;
  /** A Redis connection that hears counts change (sharded pub/sub), for live counts; null unless asked for. */
  readonly subscriberRedis: RedisClient | null;
  /** Hears every write to a counter hash, on every Redis node, so counts may be kept in memory; null unless asked for. */
  readonly countInvalidations: CountInvalidations | null;
  /** Null unless asked for. */
  readonly rabbit: Connection | null;
  /** Redis's clock as measured from this process, which write deadlines are set on. */
  readonly redisClock: RedisClock;
  /** Per client, a call that resolves when it answers: what readiness asks. */
  probes(): Record<string, () => Promise<unknown>>;
  /** Per client watched but not needed to serve: null when it is well, else a sentence saying what is not. */
  advisories(): Record<string, () => Promise<string | null>>;
  /** Closes every client, in the reverse order of opening. */
  close(): Promise<void>;
}

export interface ClientNeeds {
  /** RabbitMQ, for the pipeline or a reconcile pass. */
  readonly rabbit?: boolean;
  /**
   * A RabbitMQ connection only to report whether the broker is reachable: an API
   * process does not need it to serve (its likes wait in the outbox meanwhile), so
   * readiness reports it as degraded, never as unready.
   */
  readonly watchRabbit?: boolean;
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
  /** Called for every SQL statement answered, with how long PostgreSQL took (metrics; tests count queries with it). */
  readonly onSqlQuery?: (durationMs: number) => void;
  /** Called for every command the request-serving Redis client got a reply (or error) to, with its round trip. */
  readonly onRedisCommand?: (command: string, durationMs: number) => void;
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

/** How long opening waits for RabbitMQ when it is needed (the pipeline, a reconcile pass) before it fails. */
const rabbitConnectTimeoutMs = 10_000;

/**
 * How long one client may take to close politely (QUIT, a broker's close) before
 * its connection is dropped: a store that answers nothing would otherwise hold the
 * close for as long as it stalls, and the relay's connection has no command timeout.
 */
const politeCloseMs = 500;

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

/** Runs `polite`; when it has not closed within `politeCloseMs`, runs `force` (if the client has one) and stops waiting. */
async function closeWithin(polite: () => Promise<unknown>, force: () => void): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), politeCloseMs)));
  const outcome = await Promise.race([
    polite().then(
      () => "closed" as const,
      () => "failed" as const,
    ),
    late,
  ]);
  clearTimeout(timer);
  if (outcome !== "closed") force();
}

/**
 * Opens the clients `needs` asks for, once every store answers and passes the
 * checks at start (a refusal throws a StartRefusal). Fails when a store cannot be
 * reached; entry points try again (start-up.ts). An abort of `signal` (a start
 * attempt's deadline, a shutdown) closes what was opened and fails the open.
 */
// eslint-disable-next-line max-lines-per-function -- each client opens, waits and closes with the others in one closure, in the order they depend on each other.
export async function openClients(config: Config, logger: Logger, needs: ClientNeeds = {}, signal?: AbortSignal): Promise<Clients> {
  // In the reverse order of opening: the broker, then Redis, then PostgreSQL. Redis's connections close
  // together: they need no order among them, and under a stall each waits its full bound.
  const closers: (() => Promise<void>)[] = [];
  const redisClosers: (() => Promise<void>)[] = [];
  let closeDatabase: (() => Promise<void>) | null = null;
  const close = async () => {
    for (const closeOne of closers.splice(0).reverse()) await closeOne();
    await Promise.all(redisClosers.splice(0).map((closeOne) => closeOne()));
    const database = closeDatabase;
    closeDatabase = null;
    await database?.();
  };
  // Closing drops every connection, so whatever waits on one (a connect, a check) fails at once.
  const abandon = () => void close();
  signal?.addEventListener("abort", abandon, { once: true });
  try {
    signal?.throwIfAborted();
    const db = createDatabase({
      url: config.databaseUrl,
      connectTimeoutMs: config.postgresConnectTimeoutMs,
      statementTimeoutMs: config.postgresStatementTimeoutMs,
      onQuery: needs.onSqlQuery,
      onConnectionError: (err) => logger.warn({ err }, "PostgreSQL connection lost; the pool reconnects"),
    });
    closeDatabase = () =>
      closeWithin(
        () => db.$disconnect(),
        () => {},
      );
    await db.$connect();
    // Connecting may not reach the server yet (the pool connects on demand): a start waits until it answers.
    await db.$queryRaw`SELECT 1`;

    const connectRedis = async (commandTimeoutMs: number | undefined, subscriber = false) => {
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
      redisClosers.push(() => {
        closingClient(client);
        return closeWithin(
          () => client.quit(),
          () => client.disconnect(),
        );
      });
      await client.connect();
      return client;
    };
    const redis = await connectRedis(config.redisCommandTimeoutMs);
    if (needs.onRedisCommand) timeCommands(redis, needs.onRedisCommand);
    await checkRedisVersion(redis);
    // Write deadlines are set on Redis's clock, as measured from here (redis-clock.ts): the first samples before serving.
    const clock = watchRedisClock(redis);
    redisClosers.push(async () => clock.close());
    for (let i = 0; i < 3; i++) await clock.sample();
    // Errors and refusals only, where another process says the warnings.
    const startLogger = needs.startWarnings === false && logger.isLevelEnabled("warn") ? logger.child({}, { level: "error" }) : logger;
    warnOfClock(clock, startLogger);
    const durability = await checkDurability(redis, { policy: config.redisDurability, refuse: config.production, logger: startLogger });
    // Writes that wait for replicas have connections of their own (replica-acks.ts).
    if (config.redisReplicaAcks > 0) {
      const writers = await Promise.all(Array.from({ length: replicaAckConnections }, () => connectRedis(config.redisCommandTimeoutMs)));
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
    if (fence) closers.push(() => fence.close());
    // The relay's reads block, and after an outage one read can return a large backlog that takes
    // longer than a request's timeout to arrive: a timeout there would repeat the same read forever.
    const relayRedis = needs.relay ? await connectRedis(undefined) : null;
    const subscriberRedis = needs.subscriber ? await connectRedis(config.redisCommandTimeoutMs, true) : null;
    // Not under Sentinel: a listener still armed on a primary just demoted hears none of the new
    // primary's writes until it reconnects, and counts kept in memory would be stale meanwhile
    // (seen in test/integration/stores/redis/sentinel.test.ts); every count is read from Redis.
    const keepsCounts = needs.countInvalidations && config.hotCountsTargets > 0 && config.redisSentinels.length === 0;
    const countInvalidations = keepsCounts ? listenToCounterWrites(config, redis, logger) : null;
    // Its connections QUIT with no timeout of their own; the process ending drops whatever did not close.
    if (countInvalidations)
      redisClosers.push(() =>
        closeWithin(
          () => countInvalidations.close(),
          () => {},
        ),
      );

    let rabbit: Connection | null = null;
    let watched: Connection | null = null;
    if (needs.rabbit || needs.watchRabbit) {
      const connection = createRabbitConnection(config.amqpUrl, logger);
      closers.push(() =>
        closeWithin(
          () => connection.close(),
          () => {},
        ),
      );
      if (needs.rabbit) {
        // The pipeline cannot declare its queues without the broker: a start waits for it like for the others.
        await connection.onConnect(rabbitConnectTimeoutMs, true);
        rabbit = connection;
      } else watched = connection;
    }
    const probes = () => ({
      postgres: () => db.$queryRaw`SELECT 1`,
      // Writes are refused while Redis answers but its clock cannot be told well enough.
      "redis clock": async () => {
        const problem = clock.answering() ? clock.problem() : null;
        if (problem) throw new Error(problem);
      },
      ...(rabbit && {
        rabbitmq: async () => {
          if (!rabbit?.ready) throw new Error("not connected");
        },
      }),
    });
    // Redis out of reach is degraded service, not an outage: reads answer from PostgreSQL and sign-ins
    // work, so a balancer that took every process out for it would turn it into one.
    const advisories = () => ({
      redis: () =>
        redis.ping().then(
          () => null,
          (err: unknown) =>
            `Redis does not answer (${err instanceof Error ? err.message : String(err)}): counts are read from PostgreSQL, and changes that need Redis are refused until it answers`,
        ),
      ...(watched && {
        rabbitmq: async () => (watched?.ready ? null : "RabbitMQ is not connected: likes wait in the outbox until it is"),
      }),
    });
    signal?.throwIfAborted();
    return { db, redis, relayRedis, subscriberRedis, countInvalidations, rabbit, redisClock: clock, probes, advisories, close };
  } catch (error) {
    await close();
    throw signal?.aborted ? signal.reason : error;
  } finally {
    signal?.removeEventListener("abort", abandon);
  }
}
