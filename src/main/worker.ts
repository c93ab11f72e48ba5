// Entry point of `npm run worker`: the persistence pipeline alone (outbox relay,
// persist and repair consumers, reconcile schedule), for running it apart from
// the API; `npm start` runs it beside the API processes. It waits for its stores
// at start; SIGTERM and SIGINT close it in reverse order.
import { compose } from "../compose.js";
import { createLogger } from "../logger.js";
import { answerMetricsRequests, serveMetrics } from "../metrics-endpoint.js";
import { onTermination } from "../shutdown.js";
import { loadConfigOrRefuse, openPatiently, runStart } from "../start-up.js";
import { openClients } from "../stores/clients.js";

const config = loadConfigOrRefuse("pipeline");
const logger = createLogger(config.logLevel, "pipeline");
const shutdown = onTermination(logger);
await runStart(logger, shutdown, start);

async function start(waiting: AbortSignal): Promise<void> {
  const clients = await openPatiently((signal) => openClients(config, logger, { rabbit: true, relay: true }, signal), logger, { signal: waiting });
  shutdown.add("the store clients", () => clients.close());
  const pipeline = await compose(config, clients, logger).startPipeline();
  shutdown.add("the pipeline", () => pipeline.close());
  if (config.metricsPort !== 0) {
    // Under `npm start` the supervisor serves every process's metrics, summed, on METRICS_PORT, as for the API.
    if (process.send) answerMetricsRequests([pipeline.metrics.registry]);
    else {
      const server = await serveMetrics(pipeline.metrics.registry, config.host, config.metricsPort, logger);
      shutdown.add("the metrics server", () => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));
    }
  }
  logger.info("pipeline running");
}
