// Entry point: the persistence pipeline alone (outbox relay and persist consumers),
// for running it apart from the API. SIGTERM and SIGINT close it in reverse order.
import { loadConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { startPipeline } from "./pipeline/pipeline.js";
import { onTermination } from "./shutdown.js";
import { createDatabase } from "./stores/postgres/database.js";
import { createRabbitConnection } from "./stores/rabbitmq/connection.js";
import { createRedisClient, type RedisClient } from "./stores/redis/client.js";

const config = loadConfig();
const logger = createLogger(config.logLevel, "worker");
const db = createDatabase({
  url: config.databaseUrl,
  onConnectionError: (err) => logger.warn({ err }, "PostgreSQL connection lost; the pool reconnects"),
});
const [redis, relayRedis] = [0, 1].map(() => createRedisClient({ url: config.redisUrl, clusterNodes: config.redisClusterNodes })) as [RedisClient, RedisClient];
for (const client of [redis, relayRedis]) {
  client.on("error", (err: Error) => logger.warn({ err }, "Redis connection problem"));
  await client.connect();
}
const rabbit = createRabbitConnection(config.amqpUrl, logger);
const pipeline = await startPipeline(config, { db, redis, relayRedis, rabbit }, logger);
logger.info("worker running");

onTermination(logger, async () => {
  await pipeline.close();
  await rabbit.close();
  await relayRedis.quit();
  await redis.quit();
  await db.$disconnect();
});
