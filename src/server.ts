// Entry point: configuration → clients → services → GraphQL over HTTP.
// SIGTERM and SIGINT close everything in reverse order.
import { startStandaloneServer } from "@apollo/server/standalone";
import type { Logger } from "pino";
import { loadConfig, type Config } from "./config.js";
import { createContext } from "./graphql/context.js";
import { createGraphQLServer } from "./graphql/server.js";
import { createLogger } from "./logger.js";
import { createDatabase } from "./stores/postgres/database.js";
import { createRedisClient } from "./stores/redis/client.js";
import { createServices } from "./wiring.js";
import { onTermination } from "./shutdown.js";
import { startPipelineProcess } from "./worker.js";

export interface RunningApi {
  readonly url: string;
  close(): Promise<void>;
}

export interface ApiHooks {
  /** Called for every SQL statement the API sends. */
  readonly onSqlQuery?: () => void;
}

export async function startApi(config: Config, logger: Logger, hooks: ApiHooks = {}): Promise<RunningApi> {
  const db = createDatabase({
    url: config.databaseUrl,
    onQuery: hooks.onSqlQuery,
    onConnectionError: (err) => logger.warn({ err }, "PostgreSQL connection lost; the pool reconnects"),
  });
  const redis = createRedisClient({ url: config.redisUrl, clusterNodes: config.redisClusterNodes });
  redis.on("error", (err: Error) => logger.warn({ err }, "Redis connection problem"));
  await redis.connect();
  await db.$connect();

  const services = createServices(config, { db, redis });
  const apollo = createGraphQLServer({ logger, introspection: !config.production });
  const { url } = await startStandaloneServer(apollo, {
    listen: { port: config.port, host: config.host },
    context: ({ req }) => createContext(services, req),
  });

  return {
    url,
    async close() {
      await apollo.stop();
      await redis.quit();
      await db.$disconnect();
    },
  };
}

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel, "api");
  const shutdown = onTermination(logger);
  // Embedded: the persistence pipeline runs in this process too, on clients of its own.
  // Registered first, it closes after the API has stopped taking requests.
  if (config.pipeline === "embedded") await startPipelineProcess(config, logger.child({ name: "pipeline" }), shutdown);
  const api = await startApi(config, logger);
  shutdown.add(() => api.close());
  logger.info({ url: `${api.url}graphql` }, "serving GraphQL");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await main();
}
