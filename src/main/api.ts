// Entry point of one API process (npm start runs one per core): GraphQL over
// HTTP, without the persistence pipeline. SIGTERM and SIGINT stop taking
// requests, let those in flight finish, then close the clients.
import cluster from "node:cluster";
import { compose } from "../compose.js";
import { preparePersistedQueries } from "../compose/persisted-queries.js";
import { configWarnings } from "../process/config-warnings.js";
import { createApiMetrics } from "../graphql/api-metrics.js";
import { serveGraphQL } from "../graphql/server.js";
import { watchColdReads } from "../process/cold-reads-metrics.js";
import { watchRedisClockMetrics } from "../process/redis-clock-metrics.js";
import { watchHotCounts } from "../process/hot-counts-metrics.js";
import { createLogger } from "../process/logger.js";
import { answerMetricsRequests, serveMetrics } from "../process/metrics-endpoint.js";
import { onTermination } from "../process/shutdown.js";
import { loadConfigOrRefuse, openPatiently, runStart } from "../process/start-up.js";
import { openClients } from "../stores/clients.js";
import { serveWhileStarting, type StartingServer } from "../process/starting-server.js";

const config = loadConfigOrRefuse("api");
const logger = createLogger(config.logLevel, "api", cluster.worker ? { apiProcess: cluster.worker.id } : {}, { pretty: !config.production });
// Under npm start the supervisor says them, once for all its processes.
if (!cluster.worker) for (const warning of configWarnings(config)) logger.warn(warning);
const shutdown = onTermination(logger);
await runStart(logger, shutdown, start);

async function start(waiting: AbortSignal): Promise<void> {
  // Before any store: a manifest that cannot be read refuses the start.
  const persistedQueries = preparePersistedQueries(config);
  const metrics = config.metricsPort === 0 ? null : createApiMetrics();
  // Served only while a store cannot be reached: readiness 503 and liveness meanwhile.
  let starting = null as Promise<StartingServer | null> | null;
  const needs = {
    watchRabbit: true,
    subscriber: true,
    countInvalidations: true,
    // Under npm start the first API process says what it finds of Redis, for all of them.
    startWarnings: !cluster.worker || cluster.worker.id === 1,
    ...(metrics && { onSqlQuery: metrics.observeSqlQuery, onRedisCommand: metrics.observeRedisCommand }),
  };
  const clients = await openPatiently((signal) => openClients(config, logger, needs, signal), logger, {
    signal: waiting,
    onWaiting: (error) => {
      const reason = `waiting for its stores (${error instanceof Error ? error.message : String(error)})`;
      starting ??= serveWhileStarting(config.host, config.port).then(
        (server) => {
          shutdown.add("the starting server", () => server.close());
          return server;
        },
        (err: unknown) => {
          logger.warn({ err }, "readiness cannot be served while waiting for the stores");
          return null;
        },
      );
      void starting.then((server) => server?.waitingFor(reason));
    },
  });
  shutdown.add("the store clients", () => clients.close());
  await (await starting)?.close();
  if (metrics) {
    // Under `npm start` the supervisor serves every process's metrics, summed, on METRICS_PORT.
    if (process.send) answerMetricsRequests([metrics.registry]);
    else {
      const server = await serveMetrics(metrics.registry, config.host, config.metricsPort, logger);
      shutdown.add("the metrics server", () => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));
    }
  }
  // Loaded only when asked for: without an endpoint no OpenTelemetry code runs or loads.
  const tracing = config.tracing
    ? (await import("../process/tracing.js")).startTracing({ ...config.tracing, attributes: { "process.pid": process.pid } })
    : null;
  if (tracing) shutdown.add("tracing", () => tracing.close());
  const app = compose(config, clients, logger, metrics ? { readinessFailures: metrics.readinessFailures } : {});
  shutdown.add("the loads into Redis behind reads", () => app.close());
  if (metrics && app.hotCounts) watchHotCounts(metrics.registry, app.hotCounts);
  if (metrics) watchColdReads(metrics.registry, app.reachability, app.warmer, app.loads);
  if (metrics) watchRedisClockMetrics(metrics.registry, clients.redisClock);
  // Learns in the background which users exist; requests are served meanwhile, their tokens checked as before.
  const directory = app.startUserDirectory();
  shutdown.add("the user directory", () => directory.close());
  // Views waiting in memory go to Redis before the clients close (after requests in flight finished).
  shutdown.add("the views waiting in memory", () => app.services.views.close());
  const api = await serveGraphQL(app.services, {
    logger,
    isUnavailable: app.isUnavailable,
    requestDeadlineMs: config.requestDeadlineMs,
    contentDeadlineMs: config.contentDeadlineMs,
    readiness: app.readiness,
    limits: config.limits,
    trustProxy: config.trustProxy,
    introspection: !config.production,
    host: config.host,
    port: config.port,
    keepAliveTimeoutMs: config.httpKeepAliveTimeoutMs,
    corsOrigins: config.corsOrigins,
    explorer: config.explorer,
    live: config.live,
    persistedQueries: persistedQueries(clients.redis, logger),
    ...(metrics && { metrics }),
    ...(tracing && { plugins: [tracing.plugin] }),
  });
  shutdown.add("the GraphQL server", () => api.close());
  logger.info({ url: `${api.url}graphql` }, "API process ready");
}
