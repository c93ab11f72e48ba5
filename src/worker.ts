// Entry point of `npm run worker`: the persistence pipeline alone (outbox relay,
// persist and repair consumers, reconcile schedule), for running it apart from
// the API; `npm start` runs it beside the API processes. It waits for its stores
// at start; SIGTERM and SIGINT close it in reverse order.
import { compose } from "./compose.js";
import { createLogger } from "./logger.js";
import { answerMetricsRequests } from "./metrics-endpoint.js";
import { onTermination } from "./shutdown.js";
import { loadConfigOrRefuse, openPatiently, runStart } from "./start-up.js";
import { openClients } from "./stores/clients.js";

const config = loadConfigOrRefuse("pipeline");
const logger = createLogger(config.logLevel, "pipeline");
const shutdown = onTermination(logger);
await runStart(logger, shutdown, start);

async function start(waiting: AbortSignal): Promise<void> {
  const clients = await openPatiently((signal) => openClients(config, logger, { rabbit: true, relay: true }, signal), logger, { signal: waiting });
  shutdown.add("the store clients", () => clients.close());
  // Started by `npm start`'s supervisor (an IPC channel is open): it serves the metrics of every process
  // on METRICS_PORT, this process's included, so this one answers its scrapes instead of listening.
  const supervised = process.send !== undefined;
  const pipeline = await compose(supervised ? { ...config, metricsPort: 0 } : config, clients, logger).startPipeline();
  shutdown.add("the pipeline", () => pipeline.close());
  if (supervised && config.metricsPort !== 0) answerMetricsRequests([pipeline.metrics.registry]);
  logger.info("pipeline running");
}
