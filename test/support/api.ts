// A running API on an ephemeral port, wired to the test database and private Redis.
import type { ApolloServerPlugin } from "@apollo/server";
import type { Logger } from "pino";
import { compose, type App } from "../../src/compose.js";
import { preparePersistedQueries } from "../../src/compose/persisted-queries.js";
import type { Config } from "../../src/config.js";
import type { Services } from "../../src/domain/services.js";
import type { MemberIndexLoader } from "../../src/domain/member-indexes.js";
import type { TargetUses } from "../../src/domain/target-uses.js";
import type { Warmer } from "../../src/domain/warmer.js";
import type { DirectoryLoad } from "../../src/domain/user-directory.js";
import type { ApiMetrics } from "../../src/graphql/api-metrics.js";
import type { LiveServer } from "../../src/graphql/live/live-server.js";
import type { Context } from "../../src/graphql/context.js";
import { serveGraphQL } from "../../src/graphql/server.js";
import { openClients } from "../../src/stores/clients.js";
import type { HotCounts } from "../../src/stores/redis/hot-counts.js";
import { graphqlClient, silentLogger, testConfig } from "./env.js";

export interface TestApi {
  readonly config: Config;
  readonly url: string;
  readonly gql: ReturnType<typeof graphqlClient>;
  readonly services: Services;
  /** Subscriptions over WebSocket. */
  readonly live: LiveServer | null;
  /** SQL statements the API has sent since it started. */
  sqlQueries(): number;
  /** What loading the existing users found; startTestApi waits for it, so counted SQL starts after it. */
  readonly usersLoaded: DirectoryLoad;
  /** Whether the API knows the user exists without asking PostgreSQL. */
  knowsUser(userId: bigint): boolean;
  /** The counts the API keeps in memory (HOT_COUNTS_TARGETS=0: null). */
  readonly hotCounts: HotCounts | null;
  /** Loads the member indexes reads find missing (null on a cluster). */
  readonly memberIndexes: MemberIndexLoader | null;
  /** Loads into Redis the targets reads answered from PostgreSQL. */
  readonly warmer: Warmer;
  /** Whether the API last found Redis answering. */
  redisReachable(): boolean;
  /** The targets the API used, told to Redis's use records when flushed. */
  readonly uses: TargetUses;
  /** What the API's loads found held from another replication history, and changes a failover lost. */
  readonly loads: App["loads"];
  close(): Promise<void>;
}

export interface TestApiOptions {
  /** Where the API logs; silent by default. */
  readonly logger?: Logger;
  /** Counts requests and store latencies when given, as an API process does. */
  readonly metrics?: ApiMetrics;
  readonly plugins?: readonly ApolloServerPlugin<Context>[];
}

export async function startTestApi(overrides: Record<string, string> = {}, options: TestApiOptions = {}): Promise<TestApi> {
  const config = testConfig(overrides);
  const logger = options.logger ?? silentLogger;
  const metrics = options.metrics;
  let queries = 0;
  const clients = await openClients(config, logger, {
    subscriber: true,
    countInvalidations: true,
    onSqlQuery: (durationMs) => {
      queries++;
      metrics?.observeSqlQuery(durationMs);
    },
    ...(metrics && { onRedisCommand: metrics.observeRedisCommand }),
  });
  const app = compose(config, clients, logger);
  const directory = app.startUserDirectory();
  const usersLoaded = await directory.loaded;
  if (!usersLoaded) throw new Error("The test API's user directory closed before it loaded.");
  const api = await serveGraphQL(app.services, {
    logger,
    isUnavailable: app.isUnavailable,
    requestDeadlineMs: config.requestDeadlineMs,
    contentDeadlineMs: config.contentDeadlineMs,
    readiness: app.readiness,
    limits: config.limits,
    trustProxy: config.trustProxy,
    introspection: true,
    host: config.host,
    port: config.port,
    keepAliveTimeoutMs: config.httpKeepAliveTimeoutMs,
    corsOrigins: config.corsOrigins,
    explorer: config.explorer,
    live: config.live,
    persistedQueries: preparePersistedQueries(config)(clients.redis, logger),
    ...(metrics && { metrics }),
    ...(options.plugins && { plugins: options.plugins }),
  });
  return {
    config,
    url: api.url,
    gql: graphqlClient(api.url),
    services: app.services,
    live: api.live,
    sqlQueries: () => queries,
    usersLoaded,
    knowsUser: (userId) => directory.knows(userId),
    hotCounts: app.hotCounts,
    memberIndexes: app.memberIndexes,
    warmer: app.warmer,
    redisReachable: () => app.reachability.reachable(),
    uses: app.uses,
    loads: app.loads,
    async close() {
      await api.close();
      await directory.close();
      await app.close();
      await clients.close();
    },
  };
}
