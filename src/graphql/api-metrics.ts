// Prometheus metrics of an API process: GraphQL requests by operation, errors by
// code, rate-limited requests, the latency of the Redis commands and SQL
// statements they cost, and the readiness checks that failed. Label values are
// bounded whatever clients send: an attacker choosing operation names must not
// grow the registry without end.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { OperationFacts } from "./plugins/operation-facts.js";
import type { CheckFailures } from "./readiness.js";
import type { HttpFacts } from "./request-log.js";
import { ApolloServerErrorCode } from "@apollo/server/errors";

export interface ApiMetricsOptions {
  /** Distinct operation names kept as labels; later names count as "other". Default 200. */
  readonly maxOperationNames?: number;
}

export interface ApiMetrics {
  readonly registry: Registry;
  /** Records one answered GraphQL request. */
  readonly observeRequest: (http: HttpFacts, operation: OperationFacts | undefined) => void;
  /** Records one Redis command, from sending it to its reply. */
  readonly observeRedisCommand: (command: string, durationMs: number) => void;
  /** Records one SQL statement, as long as PostgreSQL took to answer it. */
  readonly observeSqlQuery: (durationMs: number) => void;
  /** Reports live counts' connections, subscriptions and watched posts, read at each scrape. */
  readonly watchLive: (read: () => LiveFacts) => void;
  /** Records one live client dropped for not taking its messages. */
  readonly observeDroppedClient: () => void;
  /** Counts the checks that failed in each readiness report (given to the readiness compose builds). */
  readonly readinessFailures: CheckFailures;
}

export interface LiveFacts {
  readonly connections: number;
  readonly subscriptions: number;
  readonly posts: number;
}

/** Seconds: from a cached feed read (sub-millisecond) to a request a timeout ends. */
const requestBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const storeBuckets = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];

/** A name as GraphQL allows one, and not absurdly long. */
const operationNameShape = /^[_A-Za-z][_0-9A-Za-z]{0,63}$/;

/** Codes for requests answered before any operation ran (no facts from Apollo). */
function codeOfStatus(status: number): string {
  if (status === 413) return "PAYLOAD_TOO_LARGE";
  if (status === 429) return "RATE_LIMITED";
  return status >= 500 ? ApolloServerErrorCode.INTERNAL_SERVER_ERROR : ApolloServerErrorCode.BAD_REQUEST;
}

/** Labels for operation names: each well-formed name until `maxOperationNames` are known, then "other". */
function operationLabels(maxOperationNames: number): (operation: OperationFacts | undefined) => string {
  const knownNames = new Set<string>();
  return (operation) => {
    if (!operation?.operationType) return "invalid";
    const name = operation.operationName;
    if (name === null) return "anonymous";
    if (knownNames.has(name)) return name;
    if (!operationNameShape.test(name) || knownNames.size >= maxOperationNames) return "other";
    knownNames.add(name);
    return name;
  };
}

// Codes come from the service itself, yet a cap costs nothing and guards against a future leak of free text.
function codeLabels(): (code: string) => string {
  const knownCodes = new Set<string>();
  return (code) => {
    if (knownCodes.has(code)) return code;
    if (!/^[A-Z][A-Z0-9_]{0,63}$/.test(code) || knownCodes.size >= 50) return "OTHER";
    knownCodes.add(code);
    return code;
  };
}

function readinessCounter(registry: Registry): Counter<"check" | "effect"> {
  return new Counter({
    name: "likes_readiness_checks_failed_total",
    help: 'Readiness reports in which a check did not answer "ok", by check; effect "unavailable" (HTTP 503) for a probe, "degraded" for an advisory',
    labelNames: ["check", "effect"] as const,
    registers: [registry],
  });
}

/** Each answered request's duration by operation, its errors by code, and whether rates limited it. */
function requestObserver(registry: Registry, maxOperationNames: number): ApiMetrics["observeRequest"] {
  const requestDuration = new Histogram({
    name: "likes_graphql_request_duration_seconds",
    help: 'GraphQL requests by operation name ("anonymous" unnamed, "invalid" when no operation ran, "other" past the cap of names) and type',
    labelNames: ["operation", "type"] as const,
    buckets: requestBuckets,
    registers: [registry],
  });
  const errors = new Counter({
    name: "likes_graphql_errors_total",
    help: "Errors answered to GraphQL requests, by extensions.code",
    labelNames: ["code"] as const,
    registers: [registry],
  });
  const rateLimited = new Counter({
    name: "likes_graphql_rate_limited_total",
    help: "GraphQL requests refused, wholly or partly, with RATE_LIMITED",
    registers: [registry],
  });
  const operationLabel = operationLabels(maxOperationNames);
  const codeLabel = codeLabels();
  return (http, operation) => {
    requestDuration.observe({ operation: operationLabel(operation), type: operation?.operationType ?? "none" }, http.durationMs / 1000);
    const codes = operation ? operation.errorCodes : http.status >= 400 ? [codeOfStatus(http.status)] : [];
    for (const code of codes) errors.inc({ code: codeLabel(code) });
    if (codes.includes("RATE_LIMITED")) rateLimited.inc();
  };
}

function storeObservers(registry: Registry): Pick<ApiMetrics, "observeRedisCommand" | "observeSqlQuery"> {
  const redisDuration = new Histogram({
    name: "likes_redis_command_duration_seconds",
    help: "Redis commands of the API, from sending to the reply, by command",
    labelNames: ["command"] as const,
    buckets: storeBuckets,
    registers: [registry],
  });
  const sqlDuration = new Histogram({
    name: "likes_postgres_query_duration_seconds",
    help: "SQL statements of the API, as long as PostgreSQL took to answer",
    buckets: storeBuckets,
    registers: [registry],
  });
  return {
    observeRedisCommand: (command, durationMs) => {
      redisDuration.observe({ command: command.toLowerCase() }, durationMs / 1000);
    },
    observeSqlQuery: (durationMs) => {
      sqlDuration.observe(durationMs / 1000);
    },
  };
}

function liveObservers(registry: Registry): Pick<ApiMetrics, "watchLive" | "observeDroppedClient"> {
  const droppedClients = new Counter({
    name: "likes_live_clients_dropped_total",
    help: "WebSocket clients dropped for not taking their messages in time",
    registers: [registry],
  });
  let live: (() => LiveFacts) | null = null;
  const liveGauge = (name: string, help: string, pick: (facts: LiveFacts) => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        if (live) this.set(pick(live()));
      },
    });
  liveGauge("likes_live_connections", "Open WebSocket connections", (f) => f.connections);
  liveGauge("likes_live_subscriptions", "Live subscriptions", (f) => f.subscriptions);
  liveGauge("likes_live_posts_watched", "Distinct posts the process watches for its subscribers", (f) => f.posts);
  return {
    watchLive: (read) => {
      live = read;
    },
    observeDroppedClient: () => droppedClients.inc(),
  };
}

export function createApiMetrics(options: ApiMetricsOptions = {}): ApiMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    readinessFailures: readinessCounter(registry),
    observeRequest: requestObserver(registry, options.maxOperationNames ?? 200),
    ...storeObservers(registry),
    ...liveObservers(registry),
  };
}
