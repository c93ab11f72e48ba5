// Entry point of `npm run worker`: the persistence pipeline alone (outbox relay,
// persist and repair consumers, reconcile schedule), for running it apart from
// the API; `npm start` runs it beside the API processes. SIGTERM and SIGINT
// close it in reverse order.
import { compose } from "./compose.js";
import { loadConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { onTermination } from "./shutdown.js";
import { openClients } from "./stores/clients.js";

const config = loadConfig();
const logger = createLogger(config.logLevel, "pipeline");
const shutdown = onTermination(logger);
const clients = await openClients(config, logger, { rabbit: true, relay: true });
shutdown.add(() => clients.close());
const pipeline = await compose(config, clients, logger).startPipeline();
shutdown.add(() => pipeline.close());
logger.info("pipeline running");
