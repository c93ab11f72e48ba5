// Configuration and clients for tests: the worker's own database, Redis and Redis Cluster
// (test/setup/global.ts), and helpers to make users and call the API.
import { randomUUID } from "node:crypto";
import { Cluster } from "ioredis";
import { pino } from "pino";
import { describe, inject, it } from "vitest";
import { loadConfig, type Config } from "../../src/config.js";
import { createTokenService } from "../../src/graphql/tokens.js";
import { createDatabase, type Database } from "../../src/stores/postgres/database.js";
import { createRedisClient, type RedisClient } from "../../src/stores/redis/client.js";

export const silentLogger = pino({ level: "silent" });

/** Every configuration this test file made: test/setup/per-file.ts removes their RabbitMQ queues after it. */
export const testConfigs: Config[] = [];

export function testConfig(overrides: Record<string, string> = {}): Config {
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: privateDatabaseUrl(),
    REDIS_URL: privateRedisUrl(),
    REDIS_CLUSTER_NODES: onCluster() ? clusterNodes().join(",") : "",
    AMQP_URL: inject("amqpUrl"),
    RABBITMQ_PREFIX: `t${uniqueTag()}`,
    METRICS_PORT: "0",
    RECONCILE_CRON: "off",
    PORT: "0",
    JWT_SECRET: "test-secret-of-sufficient-length",
    LOG_LEVEL: "silent",
    // A short linger: most tests wait for PostgreSQL, and each wait would pay the default
    // second. The tests of batching set their own.
    PERSIST_LINGER_MS: "20",
    // Classic queues: a quorum queue takes the broker a Raft log to declare and delete, and each
    // configuration declares seven. The tests of what quorum queues add (a delivery limit,
    // dead-lettering at least once) ask for them.
    RABBITMQ_QUEUE_TYPE: "classic",
    ...overrides,
  });
  testConfigs.push(config);
  return config;
}

/**
 * Deadlines for tests of exactness under bursts of hundreds of concurrent writes. The suite's
 * files share the machine's cores, so a burst's last writes may wait past the 1 s defaults;
 * what a deadline does is not what these tests check (deadlines.test.ts and the fault tests do).
 */
export const burstDeadlines = { REQUEST_DEADLINE_MS: "5000", REDIS_COMMAND_TIMEOUT_MS: "5000" } as const;

export function openDatabase(config = testConfig()): Database {
  return createDatabase({ url: config.databaseUrl, poolSize: 4 });
}

/**
 * This worker's slot (VITEST_POOL_ID: 1 to vitest.config.ts's maxWorkers). Files run side by
 * side, each worker with a database, a Redis and a Redis Cluster of its own (test/setup/global.ts),
 * so a file may empty its tables, count its Redis's commands or flush it.
 */
function ofThisWorker<T>(perSlot: readonly T[]): T {
  const slot = Number(process.env.VITEST_POOL_ID ?? "1");
  const stores = perSlot[slot - 1];
  // Two workers given the same stores would see each other's data: better no test than a wrong one.
  if (stores === undefined) throw new Error(`no stores for vitest worker ${slot}: test/setup/global.ts started ${perSlot.length}`);
  return stores;
}

/** The port of this worker's private Redis. */
export const privateRedisPort = (): number => ofThisWorker(inject("redisPorts"));

/** The nodes of this worker's Redis Cluster. */
export const clusterNodes = (): string[] => ofThisWorker(inject("clusterNodes"));

/** The URL of this worker's database. */
export const privateDatabaseUrl = (): string => ofThisWorker(inject("databaseUrls"));

export const privateRedisUrl = () => `redis://127.0.0.1:${privateRedisPort()}`;

/** Whether this run's project gives the service a Redis Cluster (vitest.config.ts), rather than the private Redis. */
export const onCluster = () => inject("redisMode") === "cluster";

/**
 * `it` for a test that does not depend on where Redis keeps a key: input checks, the protocol,
 * the broker or PostgreSQL alone. The project "cluster" (vitest.config.ts) runs again only the
 * tests whose keys cross Redis nodes, so it does not register this one; "single" runs it.
 */
export function itOnSingle(name: string, test: () => Promise<void> | void, timeoutMs?: number): void {
  if (!onCluster()) it(name, test, timeoutMs);
}

/** `describe` for a block of such tests only, hooks included: a block left with no test would fail its file. */
export function describeOnSingle(name: string, tests: () => void): void {
  if (!onCluster()) describe(name, tests);
}

/** A client of the Redis the service is given in this project (unless `url` or `clusterNodes` names another). */
export async function openRedis(options: { url?: string; clusterNodes?: readonly string[]; commandTimeoutMs?: number } = {}): Promise<RedisClient> {
  const nodes = options.clusterNodes ?? (options.url === undefined && onCluster() ? clusterNodes() : []);
  const client = createRedisClient({ url: options.url ?? privateRedisUrl(), clusterNodes: nodes, commandTimeoutMs: options.commandTimeoutMs });
  await client.connect();
  return client;
}

/** Empties the suite's Redis: every master of a cluster, whose client's FLUSHALL reaches one node only. Never point it at a shared one. */
export async function emptyRedis(redis: RedisClient): Promise<void> {
  await Promise.all((redis instanceof Cluster ? redis.nodes("master") : [redis]).map((server) => server.flushall()));
}

/** A short unique tag, so data made by one test never collides with another's. */
export const uniqueTag = () => randomUUID().replaceAll("-", "").slice(0, 12);

export interface TestUser {
  readonly id: bigint;
  readonly username: string;
  readonly token: string;
}

/**
 * Inserts `count` users straight into PostgreSQL and signs tokens for them:
 * registering hundreds through scrypt would only slow the suite down.
 */
export async function createUsers(db: Database, config: Config, count: number): Promise<TestUser[]> {
  const tag = uniqueTag();
  const rows = Array.from({ length: count }, (_, i) => ({
    username: `u_${tag}_${i}`,
    email: `u_${tag}_${i}@example.com`,
    passwordHash: "scrypt$00$00",
  }));
  await db.user.createMany({ data: rows });
  const created = await db.user.findMany({ where: { username: { startsWith: `u_${tag}_` } }, orderBy: { id: "asc" } });
  const tokens = createTokenService({ secret: config.jwtSecret, ttlSeconds: 3600 });
  return Promise.all(created.map(async (u) => ({ id: u.id, username: u.username, token: await tokens.issue(u.id) })));
}

export interface GraphQLResponse<T> {
  data?: T | null;
  errors?: { message: string; path?: string[]; extensions?: { code?: string; [k: string]: unknown } }[];
}

export function graphqlClient(url: string) {
  const endpoint = new URL("graphql", url).toString();
  return async function gql<T = Record<string, unknown>>(query: string, variables: Record<string, unknown> = {}, token?: string): Promise<GraphQLResponse<T>> {
    const response = await fetch(endpoint, {
      method: "POST",
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ query, variables }),
    });
    return (await response.json()) as GraphQLResponse<T>;
  };
}

/** The data of a response that must have no errors. */
export function dataOf<T>(response: GraphQLResponse<T>): T {
  if (response.errors?.length || !response.data) {
    throw new Error(`expected data, got errors: ${JSON.stringify(response.errors)}`);
  }
  return response.data;
}

/** The codes of a response's errors. */
export const codesOf = (response: GraphQLResponse<unknown>) => (response.errors ?? []).map((e) => e.extensions?.code);
