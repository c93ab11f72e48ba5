// Every connection the service opens, in one place, and one close for them all.
import { performance } from "node:perf_hooks";
import type { Command } from "ioredis";
import type { Logger } from "pino";
import type { Connection } from "rabbitmq-client";
import type { Config } from "../config.js";
import { createDatabase, isPostgresUnavailable, type Database } from "./postgres/database.js";
import { createRabbitConnection } from "./rabbitmq/connection.js";
import { createRedisClient, isRedisUnavailable, type RedisClient } from "./redis/client.js";
import { checkDurability } from "./redis/durability.js";

/** Whether an error says a store did not answer in time or could not be reached: the request may be retried. */
export const isStoreUnavailable = (error: unknown): boolean => isRedisUnavailable(error) || isPostgresUnavailable(error);

export interface Clients {
  readonly db: Database;
  readonly redis: RedisClient;
  /** A Redis connection of the outbox relay's own, since its reads block; null unless asked for. */
  readonly relayRedis: RedisClient | null;
  /** A Redis connection that hears counts change (sharded pub/sub), for live counts; null unless asked for. */
  readonly subscriberRedis: RedisClient | null;
  /** Null unless asked for. */
  readonly rabbit: Connection | null;
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

export async function openClients(config: Config, logger: Logger, needs: ClientNeeds = {}): Promise<Clients> {
  const closers: (() => Promise<void>)[] = [];
  const close = async () => {
    for (const closeOne of closers.splice(0).reverse()) await closeOne();
  };
  try {
    const db = createDatabase({
      url: config.databaseUrl,
      connectTimeoutMs: config.postgresConnectTimeoutMs,
      statementTimeoutMs: config.postgresStatementTimeoutMs,
      onQuery: needs.onSqlQuery,
      onConnectionError: (err) => logger.warn({ err }, "PostgreSQL connection lost; the pool reconnects"),
    });
    closers.push(() => db.$disconnect());
    await db.$connect();

    const connectRedis = async (commandTimeoutMs: number | undefined, subscriber = false) => {
      const client = createRedisClient({ url: config.redisUrl, clusterNodes: config.redisClusterNodes, commandTimeoutMs, subscriber });
      client.on("error", (err: Error) => logger.warn({ err }, "Redis connection problem"));
      closers.push(async () => void (await client.quit().catch(() => client.disconnect())));
      await client.connect();
      return client;
    };
    const redis = await connectRedis(config.redisCommandTimeoutMs);
    if (needs.onRedisCommand) timeCommands(redis, needs.onRedisCommand);
    await checkDurability(redis, { policy: config.redisDurability, refuse: config.production, logger });
    // The relay's reads block, and after an outage one read can return a large backlog that takes
    // longer than a request's timeout to arrive: a timeout there would repeat the same read forever.
    const relayRedis = needs.relay ? await connectRedis(undefined) : null;
    const subscriberRedis = needs.subscriber ? await connectRedis(config.redisCommandTimeoutMs, true) : null;

    let rabbit: Connection | null = null;
    let watched: Connection | null = null;
    if (needs.rabbit || needs.watchRabbit) {
      const connection = createRabbitConnection(config.amqpUrl, logger);
      closers.push(() => connection.close());
      if (needs.rabbit) rabbit = connection;
      else watched = connection;
    }
    const probes = () => ({
      postgres: () => db.$queryRaw`SELECT 1`,
      redis: () => redis.ping(),
      ...(rabbit && {
        rabbitmq: async () => {
          if (!rabbit?.ready) throw new Error("not connected");
        },
      }),
    });
    const advisories = () => ({
      ...(watched && {
        rabbitmq: async () => (watched?.ready ? null : "RabbitMQ is not connected: likes wait in the outbox until it is"),
      }),
    });
    return { db, redis, relayRedis, subscriberRedis, rabbit, probes, advisories, close };
  } catch (error) {
    await close();
    throw error;
  }
}
