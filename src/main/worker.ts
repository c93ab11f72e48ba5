// Entry point of `npm run worker`: the persistence pipeline alone (outbox relay,
// persist and repair consumers, reconcile schedule), for running it apart from
// the API; `npm start` runs it beside the API processes. It waits for its stores
// at start; SIGTERM and SIGINT close it in reverse order.
import type { Server } from "node:http";
import { compose } from "../compose.js";
import { createLogger } from "../process/logger.js";
import { answerMetricsRequests, serveMetrics } from "../process/metrics-endpoint.js";
import { watchRedisClockMetrics } from "../process/redis-clock-metrics.js";
import { onTermination } from "../process/shutdown.js";
import { loadConfigOrRefuse, openPatiently, runStart } from "../process/start-up.js";
import { openClients } from "../stores/clients.js";

const config = loadConfigOrRefuse("pipeline");
const logger = createLogger(config.logLevel, "pipeline", {}, { pretty: !config.production });
const shutdown = onTermination(logger);
await runStart(logger, shutdown, start);

async function start(waiting: AbortSignal): Promise<void> {
  // Under npm start (forked by its supervisor, so process.send is set) the first API process says what
  // it finds of Redis at start, for all; run alone (npm run worker), the pipeline says it itself.
  const clients = await openPatiently((signal) => openClients(config, logger, { rabbit: true, relay: true, startWarnings: !process.send }, signal), logger, {
    signal: waiting,
  });
  shutdown.add("the store clients", () => clients.close());
  const pipeline = await compose(config, clients, logger).startPipeline();
  let metricsServer: Server | null = null;
  // The metrics port is also the worker's liveness probe: it closes after the pipeline has drained.
  shutdown.add("the pipeline and its metrics", async () => {
    await pipeline.close();
    await new Promise<void>((resolve) => (metricsServer ? metricsServer.close(() => resolve()) : resolve()));
  });
  if (config.metricsPort !== 0) {
    // The pipeline's list writes carry deadlines on Redis's clock too.
    watchRedisClockMetrics(pipeline.metrics.registry, clients.redisClock);
    // Under `npm start` the supervisor serves every process's metrics, summed, on METRICS_PORT, as for the API.
    if (process.send) answerMetricsRequests([pipeline.metrics.registry]);
    else metricsServer = await serveMetrics(pipeline.metrics.registry, config.host, config.metricsPort, logger);
  }
  logger.info("pipeline running");
}
