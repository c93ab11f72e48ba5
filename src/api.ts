// Entry point of one API process (npm start runs one per core): GraphQL over
// HTTP, without the persistence pipeline. SIGTERM and SIGINT stop taking
// requests, let those in flight finish, then close the clients.
import cluster from "node:cluster";
import { compose } from "./compose.js";
import { loadConfig } from "./config.js";
import { serveGraphQL } from "./graphql/server.js";
import { createLogger } from "./logger.js";
import { onTermination } from "./shutdown.js";
import { openClients } from "./stores/clients.js";

const config = loadConfig();
const logger = createLogger(config.logLevel, "api", cluster.worker ? { apiProcess: cluster.worker.id } : {});
const shutdown = onTermination(logger);
const clients = await openClients(config, logger);
shutdown.add(() => clients.close());
const app = compose(config, clients, logger);
const api = await serveGraphQL(app.services, { logger, isUnavailable: app.isUnavailable, readiness: app.readiness, limits: config.limits, introspection: !config.production, host: config.host, port: config.port, trustProxy: config.trustProxy });
shutdown.add(() => api.close());
logger.info({ url: `${api.url}graphql` }, "API process ready");
