// Entry point of `npm start`: the GraphQL API in WEB_CONCURRENCY processes (one
// per core by default) sharing the port, and, unless PIPELINE=off, the
// persistence pipeline once beside them (the process `npm run worker` runs).
// SIGTERM and SIGINT stop them all; the exit code is 0 when all stopped cleanly.
import { loadConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { startSupervisor } from "./supervisor.js";

const config = loadConfig();
startSupervisor({
  logger: createLogger(config.logLevel, "supervisor"),
  apiProcesses: config.webConcurrency,
  pipeline: config.pipeline === "embedded",
  apiEntry: new URL("./api.ts", import.meta.url),
  pipelineEntry: new URL("./worker.ts", import.meta.url),
  metrics: { host: config.host, port: config.metricsPort },
});
