// Entry point: one full reconcile pass with a progress bar, a summary, then exit.
// The repairs it finds go out as compensation messages; a running worker (or
// npm start) applies them.
import { Presets, SingleBar } from "cli-progress";
import { loadConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { reconcileOnce } from "./pipeline/pipeline.js";
import { createDatabase } from "./stores/postgres/database.js";
import { createRabbitConnection } from "./stores/rabbitmq/connection.js";
import { createEventPublisher } from "./stores/rabbitmq/publisher.js";
import { createTopology } from "./stores/rabbitmq/topology.js";
import { createRedisClient } from "./stores/redis/client.js";

const config = loadConfig();
const logger = createLogger(config.logLevel === "info" ? "warn" : config.logLevel, "reconcile");
const db = createDatabase({ url: config.databaseUrl });
const redis = createRedisClient({ url: config.redisUrl, clusterNodes: config.redisClusterNodes });
redis.on("error", (err: Error) => logger.warn({ err }, "Redis connection problem"));
await redis.connect();
const rabbit = createRabbitConnection(config.amqpUrl, logger);
const publisher = createEventPublisher(
  rabbit,
  createTopology({ prefix: config.rabbitmq.prefix, persistQueues: config.persist.queues, queueType: config.rabbitmq.queueType }),
);

const bar = new SingleBar({ format: "{phase} [{bar}] {value}/{total} targets | {eta_formatted} left", etaBuffer: 20 }, Presets.shades_classic);
let phase = "";
try {
  const summary = await reconcileOnce(config, { db, redis }, publisher, (progress) => {
    const label = progress.phase === "redis" ? "Redis     " : "PostgreSQL";
    if (phase !== progress.phase) {
      if (phase) bar.stop();
      phase = progress.phase;
      bar.start(progress.total, 0, { phase: label });
    }
    bar.setTotal(progress.total);
    bar.update(progress.done, { phase: label });
  });
  if (phase) bar.stop();
  const d = summary.differences;
  console.log(
    [
      `Reconcile pass finished in ${summary.seconds.toFixed(1)} s (${Math.round(summary.targetsChecked / Math.max(summary.seconds, 0.001))} targets/s).`,
      `  targets checked          ${summary.targetsChecked}`,
      `  skipped, changes in flight ${summary.skippedInFlight}`,
      `  likes missing in PostgreSQL ${d.missingInDatabase}`,
      `  stray likes in PostgreSQL   ${d.strayInDatabase}`,
      `  PostgreSQL counters wrong   ${d.databaseCounter}`,
      `  Redis counters wrong        ${d.cacheCounter}`,
      `  repairs sent             ${summary.repairsSent} (applied by the running worker)`,
      `  cold targets evicted     ${summary.evicted}`,
    ].join("\n"),
  );
} finally {
  await publisher.close();
  await rabbit.close();
  await redis.quit();
  await db.$disconnect();
}
