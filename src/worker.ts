// Entry point: the persistence pipeline alone (outbox relay, persist and repair
// consumers, reconcile schedule), for running it apart from the API.
// SIGTERM and SIGINT close it in reverse order.
import type { Logger } from "pino";
import { loadConfig, type Config } from "./config.js";
import { createLogger } from "./logger.js";
import { startPipeline } from "./pipeline/pipeline.js";
import { onTermination, type Shutdown } from "./shutdown.js";
import { createDatabase } from "./stores/postgres/database.js";
import { createRabbitConnection } from "./stores/rabbitmq/connection.js";
import { createRedisClient } from "./stores/redis/client.js";

/** Opens the pipeline's own clients and starts it; each is closed by `shutdown`, in reverse order. */
export async function startPipelineProcess(config: Config, logger: Logger, shutdown: Shutdown): Promise<void> {
  const db = createDatabase({
    url: config.databaseUrl,
    poolSize: 4,
    onConnectionError: (err) => logger.warn({ err }, "PostgreSQL connection lost; the pool reconnects"),
  });
  shutdown.add(() => db.$disconnect());
  const connectRedis = async () => {
    const client = createRedisClient({ url: config.redisUrl, clusterNodes: config.redisClusterNodes });
    client.on("error", (err: Error) => logger.warn({ err }, "Redis connection problem"));
    shutdown.add(async () => void (await client.quit()));
    await client.connect();
    return client;
  };
  const redis = await connectRedis();
  // The relay's reads block, so it gets a connection of its own.
  const relayRedis = await connectRedis();
  const rabbit = createRabbitConnection(config.amqpUrl, logger);
  shutdown.add(() => rabbit.close());
  const pipeline = await startPipeline(config, { db, redis, relayRedis, rabbit }, logger);
  shutdown.add(() => pipeline.close());
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const config = loadConfig();
  const logger = createLogger(config.logLevel, "worker");
  await startPipelineProcess(config, logger, onTermination(logger));
  logger.info("worker running");
}
