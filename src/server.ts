// Entry point of `npm start`: the GraphQL API in WEB_CONCURRENCY processes (one
// per core by default) sharing the port, and, unless PIPELINE=off, the
// persistence pipeline once beside them (the process `npm run worker` runs).
// SIGTERM and SIGINT stop them all; the exit code is 0 when all stopped cleanly.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { startSupervisor } from "./supervisor.js";

const config = loadConfig();
// Beside this file, in what it was started as: dist/*.js (npm start), or src/*.ts under tsx (tests).
const sibling = (name: string) => new URL(`./${name}${path.extname(fileURLToPath(import.meta.url))}`, import.meta.url);
startSupervisor({
  logger: createLogger(config.logLevel, "supervisor"),
  apiProcesses: config.webConcurrency,
  pipeline: config.pipeline === "embedded",
  apiEntry: sibling("api"),
  pipelineEntry: sibling("worker"),
  metrics: { host: config.host, port: config.metricsPort },
});
