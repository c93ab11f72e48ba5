// Entry point of `npm start`: the GraphQL API in WEB_CONCURRENCY processes (one
// per core by default) sharing the port, and, unless PIPELINE=off, the
// persistence pipeline once beside them (the process `npm run worker` runs).
// SIGTERM and SIGINT stop them all; the exit code is 0 when all stopped cleanly,
// 78 when one refused to start (its configuration must change; see supervisor.ts).
import path from "node:path";
import { fileURLToPath } from "node:url";
import { configWarnings } from "../process/config-warnings.js";
import { createLogger } from "../process/logger.js";
import { loadConfigOrRefuse } from "../process/start-up.js";
import { startSupervisor } from "../process/supervisor.js";

const config = loadConfigOrRefuse("supervisor");
// Beside this file, in what it was started as: dist/*.js (npm start), or src/*.ts under tsx (tests).
const sibling = (name: string) => new URL(`./${name}${path.extname(fileURLToPath(import.meta.url))}`, import.meta.url);
const logger = createLogger(config.logLevel, "supervisor", {}, { pretty: !config.production });
for (const warning of configWarnings(config)) logger.warn(warning);
startSupervisor({
  logger,
  apiProcesses: config.webConcurrency,
  pipeline: config.pipeline === "embedded",
  apiEntry: sibling("api"),
  pipelineEntry: sibling("worker"),
  nodeOptions: config.nodeOptions,
  metrics: { host: config.host, port: config.metricsPort },
});
