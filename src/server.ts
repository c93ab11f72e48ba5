// Entry point of `npm start`: the GraphQL API, with the persistence pipeline in
// the same process unless PIPELINE=off. SIGTERM and SIGINT close everything in
// reverse order: the API stops taking requests, then the pipeline, then the clients.
import { compose } from "./compose.js";
import { loadConfig } from "./config.js";
import { serveGraphQL } from "./graphql/server.js";
import { createLogger } from "./logger.js";
import { onTermination } from "./shutdown.js";
import { openClients } from "./stores/clients.js";

const config = loadConfig();
const logger = createLogger(config.logLevel, "api");
const shutdown = onTermination(logger);
const embedded = config.pipeline === "embedded";
const clients = await openClients(config, logger, { rabbit: embedded, relay: embedded });
shutdown.add(() => clients.close());
const app = compose(config, clients, logger);
if (embedded) {
  const pipeline = await app.startPipeline();
  shutdown.add(() => pipeline.close());
}
const api = await serveGraphQL(app.services, { logger, introspection: !config.production, host: config.host, port: config.port });
shutdown.add(() => api.close());
logger.info({ url: `${api.url}graphql` }, "serving GraphQL");
