// Every connection the service opens, in one place, and one close for them all.
import type { Logger } from "pino";
import type { Connection } from "rabbitmq-client";
import type { Config } from "../config.js";
import { Closers, closeWithin, type Opening } from "./closers.js";
import { createDatabase, isPostgresUnavailable, type Database } from "./postgres/database.js";
import { createRabbitConnection } from "./rabbitmq/connection.js";
import { isRedisUnavailable, type RedisClient } from "./redis/client.js";
import type { RedisClock } from "./redis/redis-clock.js";
import { openRedisClients, type RedisClients, type RedisNeeds } from "./redis-clients.js";

/** Whether an error says a store did not answer in time or could not be reached: the request may be retried. */
export const isStoreUnavailable = (error: unknown): boolean => isRedisUnavailable(error) || isPostgresUnavailable(error);

export interface Clients extends RedisClients {
  readonly db: Database;
  /** Null unless asked for. */
  readonly rabbit: Connection | null;
  /** Per client, a call that resolves when it answers: what readiness asks. */
  probes(): Record<string, () => Promise<unknown>>;
  /** Per client watched but not needed to serve: null when it is well, else a sentence saying what is not. */
  advisories(): Record<string, () => Promise<string | null>>;
  /** Closes every client, in the reverse order of opening. */
  close(): Promise<void>;
}

export interface ClientNeeds extends RedisNeeds {
  /** RabbitMQ, for the pipeline or a reconcile pass. */
  readonly rabbit?: boolean;
  /**
   * A RabbitMQ connection only to report whether the broker is reachable: an API
   * process does not need it to serve (its likes wait in the outbox meanwhile), so
   * readiness reports it as degraded, never as unready.
   */
  readonly watchRabbit?: boolean;
  /** Called for every SQL statement answered, with how long PostgreSQL took (metrics; tests count queries with it). */
  readonly onSqlQuery?: (durationMs: number) => void;
}

/** How long opening waits for RabbitMQ when it is needed (the pipeline, a reconcile pass) before it fails. */
const rabbitConnectTimeoutMs = 10_000;

async function openDatabase({ config, logger, signal, closers }: Opening, needs: ClientNeeds): Promise<Database> {
  signal?.throwIfAborted();
  const db = createDatabase({
    url: config.databaseUrl,
    connectTimeoutMs: config.postgresConnectTimeoutMs,
    statementTimeoutMs: config.postgresStatementTimeoutMs,
    onQuery: needs.onSqlQuery,
    onConnectionError: (err) => logger.warn({ err }, "PostgreSQL connection lost; the pool reconnects"),
  });
  closers.database = () =>
    closeWithin(
      () => db.$disconnect(),
      () => {},
    );
  await db.$connect();
  // Connecting may not reach the server yet (the pool connects on demand): a start waits until it answers.
  await db.$queryRaw`SELECT 1`;
  return db;
}

/** The broker's connection: `rabbit` when the process needs it, `watched` when it only reports on it. */
async function openRabbit({ config, logger, closers }: Opening, needs: ClientNeeds): Promise<{ rabbit: Connection | null; watched: Connection | null }> {
  if (!needs.rabbit && !needs.watchRabbit) return { rabbit: null, watched: null };
  const connection = createRabbitConnection(config.amqpUrl, logger);
  closers.first.push(() =>
    closeWithin(
      () => connection.close(),
      () => {},
    ),
  );
  if (!needs.rabbit) return { rabbit: null, watched: connection };
  // The pipeline cannot declare its queues without the broker: a start waits for it like for the others.
  await connection.onConnect(rabbitConnectTimeoutMs, true);
  return { rabbit: connection, watched: null };
}

const probesOf = (db: Database, clock: RedisClock, rabbit: Connection | null) => () => ({
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
const advisoriesOf = (redis: RedisClient, watched: Connection | null) => () => ({
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

/**
 * Opens the clients `needs` asks for, once every store answers and passes the
 * checks at start (a refusal throws a StartRefusal). Fails when a store cannot be
 * reached; entry points try again (start-up.ts). An abort of `signal` (a start
 * attempt's deadline, a shutdown) closes what was opened and fails the open.
 */
export async function openClients(config: Config, logger: Logger, needs: ClientNeeds = {}, signal?: AbortSignal): Promise<Clients> {
  const closers = new Closers();
  const close = () => closers.close();
  const opening: Opening = { config, logger, signal, closers };
  // Closing drops every connection, so whatever waits on one (a connect, a check) fails at once.
  const abandon = () => void close();
  signal?.addEventListener("abort", abandon, { once: true });
  try {
    const db = await openDatabase(opening, needs);
    const redisClients = await openRedisClients(opening, needs);
    const { rabbit, watched } = await openRabbit(opening, needs);
    const probes = probesOf(db, redisClients.redisClock, rabbit);
    const advisories = advisoriesOf(redisClients.redis, watched);
    signal?.throwIfAborted();
    return { db, ...redisClients, rabbit, probes, advisories, close };
  } catch (error) {
    await close();
    throw signal?.aborted ? signal.reason : error;
  } finally {
    signal?.removeEventListener("abort", abandon);
  }
}
