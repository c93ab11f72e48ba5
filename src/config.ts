// The only reader of process.env: every setting parsed, validated, typed and frozen.
import { availableParallelism } from "node:os";
import { z } from "zod";

const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);

const schema = z.object({
  DATABASE_URL: z.url().default("postgresql://postgres@127.0.0.1:5432/likes"),
  REDIS_URL: z.url().default("redis://127.0.0.1:6379"),
  // Comma-separated seed nodes; when set, Redis is used in cluster mode.
  REDIS_CLUSTER_NODES: z.string().default(""),
  // "volatile": accept a Redis without AOF or replicas (a restart loses what the outbox holds).
  // Otherwise such a Redis is warned about, and refused when NODE_ENV=production.
  REDIS_DURABILITY: z.enum(["durable", "volatile"]).default("durable"),
  // How long a Redis command may go unanswered before it fails (a stalled Redis answers nothing).
  REDIS_COMMAND_TIMEOUT_MS: positiveInt(1000),
  // How long a GraphQL request may take before it answers SERVICE_UNAVAILABLE; every store call of the request inherits it.
  REQUEST_DEADLINE_MS: positiveInt(1000),
  // How long getting a PostgreSQL connection may take.
  POSTGRES_CONNECT_TIMEOUT_MS: positiveInt(3000),
  // How long a PostgreSQL statement may run before it is cancelled (the client gives up a second later).
  POSTGRES_STATEMENT_TIMEOUT_MS: positiveInt(10_000),
  // How long each dependency may take to answer a readiness probe (GET /health/ready).
  READINESS_TIMEOUT_MS: positiveInt(1000),
  AMQP_URL: z.url().default("amqp://guest:guest@127.0.0.1:5672"),
  JWT_SECRET: z.string().min(16, "JWT_SECRET must be at least 16 characters").default("dev-secret-change-me-in-production"),
  PORT: z.coerce.number().int().min(0).max(65535).default(4000),
  HOST: z.string().default("127.0.0.1"),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  NODE_ENV: z.string().default("development"),
  // Redis key partitions: fixed per deployment, since every key embeds its partition.
  REDIS_PARTITIONS: positiveInt(1024),
  TOKEN_TTL_SECONDS: positiveInt(7 * 24 * 3600),
  // Whether `npm start` also runs the persistence pipeline, in one process beside the API's.
  PIPELINE: z.enum(["embedded", "off"]).default("embedded"),
  // API processes `npm start` runs, sharing the port: one per core unless set.
  WEB_CONCURRENCY: z.coerce.number().int().min(1).max(256).optional(),
  // Prefix of the exchange, queues and routing keys, so deployments can share a broker.
  RABBITMQ_PREFIX: z.string().regex(/^[a-z][a-z0-9_-]*$/, "RABBITMQ_PREFIX must be lower-case letters, digits, _ or -").default("likes"),
  RABBITMQ_QUEUE_TYPE: z.enum(["quorum", "classic"]).default("quorum"),
  // Changing it on a running deployment: see src/stores/rabbitmq/partitioning.ts (refused while unsafe).
  PERSIST_QUEUES: positiveInt(2),
  // How long a change PostgreSQL refused waits in the retry queue before it is applied again.
  PERSIST_RETRY_DELAY_MS: positiveInt(30_000),
  // How long a publish may wait for the broker's confirm before it counts as failed.
  RABBITMQ_PUBLISH_TIMEOUT_MS: positiveInt(5_000),
  PERSIST_BATCH_SIZE: positiveInt(1000),
  PERSIST_LINGER_MS: positiveInt(1000),
  // Likes applied to PostgreSQL per second at most; 0 means no cap.
  PERSIST_MAX_EVENTS_PER_SECOND: z.coerce.number().int().min(0).default(0),
  RELAY_BATCH_SIZE: positiveInt(1000),
  // After a read that did not fill a batch, the relay waits this long for more entries.
  RELAY_LINGER_MS: z.coerce.number().int().min(0).max(1000).default(50),
  // Outbox entries pending longer than this on a relay that stopped are taken over.
  RELAY_CLAIM_IDLE_MS: positiveInt(30_000),
  OUTBOX_WARN_LENGTH: positiveInt(10_000),
  // Hot ranking: workers sum its windows at least this often (and after batches, at most once per gap);
  // API processes may answer a window's post ids from memory for up to RANKING_CACHE_MS (0: never).
  RANKING_REFRESH_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
  RANKING_REFRESH_GAP_MS: z.coerce.number().int().min(0).max(60_000).default(250),
  RANKING_CACHE_MS: z.coerce.number().int().min(0).max(500).default(250),
  // Counter hashes an API process keeps in memory (hot-counts.ts); 0 keeps none.
  HOT_COUNTS_TARGETS: z.coerce.number().int().min(0).max(10_000_000).default(100_000),
  // Views wait in an API process at most this long before they go to Redis (what a crash of the process may lose).
  VIEWS_FLUSH_INTERVAL_MS: z.coerce.number().int().min(50).max(60_000).default(1_000),
  // Posts with views waiting that make a process flush at once.
  VIEWS_FLUSH_POSTS: z.coerce.number().int().min(1).max(100_000).default(1_000),
  // Live counts (graphql-ws): the shortest time between two messages about one post.
  LIVE_INTERVAL_MS: z.coerce.number().int().min(100).max(60_000).default(1_000),
  // WebSocket connections one API process keeps at most; more are refused at the upgrade (HTTP 503).
  LIVE_MAX_CONNECTIONS: positiveInt(10_000),
  // Subscriptions one connection may hold at once (each watches at most 100 posts).
  LIVE_MAX_SUBSCRIPTIONS: positiveInt(10),
  // Distinct posts one API process watches at most, over all its subscriptions.
  LIVE_MAX_POSTS: positiveInt(100_000),
  // A client that has not taken a message this long, or lets more than LIVE_MAX_BUFFERED_BYTES wait, is dropped.
  LIVE_SEND_TIMEOUT_MS: positiveInt(5_000),
  LIVE_MAX_BUFFERED_BYTES: positiveInt(1024 * 1024),
  // When the worker runs a reconcile pass: a cron expression, or "off".
  RECONCILE_CRON: z.string().default("0 3 * * *"),
  RECONCILE_BATCH_SIZE: positiveInt(200),
  // Members a reconcile pass loads at once: bigger targets are compared in pieces of this size.
  RECONCILE_MEMBER_CHUNK: positiveInt(10_000),
  // Targets one API process loads from PostgreSQL at once (each holds a connection for a snapshot),
  // and how many may wait for a slot (each no longer than its request's deadline); more are SERVICE_UNAVAILABLE.
  REBUILDS_AT_ONCE: positiveInt(4),
  REBUILDS_WAITING: positiveInt(256),
  // Targets idle this long leave Redis during a reconcile pass (rebuilt on next use); 0 keeps all.
  COLD_TARGET_IDLE_SECONDS: z.coerce.number().int().min(0).default(7 * 24 * 3600),
  // Prometheus metrics at http://HOST:METRICS_PORT/metrics; 0 turns them off.
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(9464),
  // Request limits, checked before any resolver runs (docs/clients.md, "Limits").
  MAX_BODY_BYTES: positiveInt(100 * 1024),
  MAX_QUERY_DEPTH: positiveInt(12),
  MAX_QUERY_COST: positiveInt(5_000),
  MAX_ALIASES: positiveInt(30),
  MAX_MUTATIONS: positiveInt(10),
  MAX_VARIABLE_VALUES: positiveInt(1_000),
  // Tokens: accepted this long past `exp` (clocks disagree); `iss` / `aud` required and issued when set.
  JWT_CLOCK_TOLERANCE_SECONDS: z.coerce.number().int().min(0).max(300).default(30),
  JWT_ISSUER: z.string().optional().transform((v) => v || undefined),
  JWT_AUDIENCE: z.string().optional().transform((v) => v || undefined),
  // Whether X-Forwarded-For names the client: "false", "true" (any proxy), a hop count, or proxy addresses/CIDRs, comma-separated.
  TRUST_PROXY: z.string().default("false"),
  // Rate budgets, in units per minute (a quiet client may spend a minute's worth at once); 0 leaves one unlimited.
  RATE_LIMITS: z.enum(["on", "off"]).default("on"),
  RATE_LIMIT_USER_MUTATIONS: z.coerce.number().int().min(0).default(600),
  RATE_LIMIT_IP_MUTATIONS: z.coerce.number().int().min(0).default(3000),
  RATE_LIMIT_IP_SIGN_INS: z.coerce.number().int().min(0).default(300),
  RATE_LIMIT_USERNAME_LOGINS: z.coerce.number().int().min(0).default(10),
  // Queries whose cost reaches the threshold are charged their cost; cheaper ones cost no budget (and no Redis call).
  RATE_LIMIT_QUERY_COST_THRESHOLD: positiveInt(1000),
  RATE_LIMIT_VIEWER_QUERY_COST: z.coerce.number().int().min(0).default(100_000),
  RATE_LIMIT_IP_QUERY_COST: z.coerce.number().int().min(0).default(500_000),
  // Users and addresses whose mutation budgets one API process holds in memory at most (about 200 bytes
  // each; least recently charged forgotten first, losing only their units not yet reported to Redis).
  RATE_LIMIT_LOCAL_SUBJECTS: positiveInt(50_000),
  // How long an idle keep-alive connection stays open: above load balancers' idle timeouts
  // (60–65 s is common), so that the balancer, not the server, closes it and never reuses a closed one.
  HTTP_KEEP_ALIVE_TIMEOUT_MS: positiveInt(72_000),
  // Origins browsers may call the API from: comma-separated, or "*" for any. Unset: none in
  // production, any in development.
  CORS_ORIGINS: z.string().optional(),
  // OTLP/HTTP collector base URL (e.g. http://127.0.0.1:4318); when set, GraphQL operations are traced.
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url().optional(),
  OTEL_SERVICE_NAME: z.string().min(1).default("like-counter-service"),
});

/** Every setting's environment variable: docs/operations.md's table must name each, and only these. */
export const settingNames: readonly string[] = Object.freeze(Object.keys(schema.shape));

/** Fastify's `trustProxy`: whether and which proxies' X-Forwarded-For to believe. */
export type TrustProxy = boolean | number | string[];

function parseTrustProxy(value: string): TrustProxy {
  const v = value.trim().toLowerCase();
  if (v === "" || v === "false" || v === "off") return false;
  if (v === "true" || v === "on") return true;
  if (/^\d+$/.test(v)) return Number(v);
  return value.split(",").map((s) => s.trim()).filter(Boolean);
}

export interface Config {
  readonly databaseUrl: string;
  readonly redisUrl: string;
  readonly redisClusterNodes: readonly string[];
  readonly redisCommandTimeoutMs: number;
  readonly requestDeadlineMs: number;
  readonly redisDurability: "durable" | "volatile";
  readonly postgresConnectTimeoutMs: number;
  readonly postgresStatementTimeoutMs: number;
  readonly readinessTimeoutMs: number;
  readonly views: { readonly flushIntervalMs: number; readonly flushPosts: number };
  readonly live: {
    readonly intervalMs: number;
    readonly maxConnections: number;
    readonly maxSubscriptions: number;
    readonly maxPosts: number;
    readonly sendTimeoutMs: number;
    readonly maxBufferedBytes: number;
  };
  readonly amqpUrl: string;
  readonly jwtSecret: string;
  readonly port: number;
  readonly host: string;
  readonly logLevel: z.infer<typeof schema>["LOG_LEVEL"];
  readonly production: boolean;
  readonly redisPartitions: number;
  readonly tokenTtlSeconds: number;
  readonly pipeline: "embedded" | "off";
  readonly webConcurrency: number;
  readonly rabbitmq: {
    readonly prefix: string;
    readonly queueType: "quorum" | "classic";
    readonly publishTimeoutMs: number;
  };
  readonly persist: {
    readonly queues: number;
    readonly retryDelayMs: number;
    readonly batchSize: number;
    readonly lingerMs: number;
    readonly maxEventsPerSecond: number;
  };
  readonly relay: {
    readonly batchSize: number;
    readonly lingerMs: number;
    readonly claimIdleMs: number;
    readonly outboxWarnLength: number;
  };
  readonly ranking: {
    readonly refreshMs: number;
    readonly refreshGapMs: number;
    readonly cacheMs: number;
  };
  /** Counter hashes an API process keeps in memory; 0 keeps none. */
  readonly hotCountsTargets: number;
  readonly reconcile: {
    readonly cron: string | null;
    readonly batchSize: number;
    readonly memberChunk: number;
    readonly coldAfterSeconds: number;
  };
  /** Loads of targets from PostgreSQL per process: at once, and waiting at most. */
  readonly rebuilds: { readonly atOnce: number; readonly maxWaiting: number };
  readonly metricsPort: number;
  readonly limits: {
    readonly bodyBytes: number;
    readonly depth: number;
    readonly cost: number;
    readonly aliases: number;
    readonly mutations: number;
    readonly variableValues: number;
  };
  readonly jwt: {
    readonly clockToleranceSeconds: number;
    readonly issuer: string | undefined;
    readonly audience: string | undefined;
  };
  readonly trustProxy: TrustProxy;
  readonly rateLimits: {
    readonly enabled: boolean;
    readonly userMutations: number;
    readonly ipMutations: number;
    readonly ipSignIns: number;
    readonly usernameLogins: number;
    readonly queryCostThreshold: number;
    readonly viewerQueryCost: number;
    readonly ipQueryCost: number;
    readonly localSubjects: number;
  };
  readonly httpKeepAliveTimeoutMs: number;
  /** "*" allows any origin; an empty list allows none. */
  readonly corsOrigins: "*" | readonly string[];
  /** Null: no tracing, and no tracing code loaded. */
  readonly tracing: { readonly endpoint: string; readonly serviceName: string } | null;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`).join("\n");
    throw new Error(`Invalid configuration in the environment:\n${problems}`);
  }
  const e = parsed.data;
  if (e.NODE_ENV === "production" && env.JWT_SECRET === undefined) {
    throw new Error("JWT_SECRET must be set in production; the development default is public.");
  }
  return Object.freeze({
    databaseUrl: e.DATABASE_URL,
    redisUrl: e.REDIS_URL,
    redisClusterNodes: Object.freeze(e.REDIS_CLUSTER_NODES.split(",").map((s) => s.trim()).filter(Boolean)),
    redisCommandTimeoutMs: e.REDIS_COMMAND_TIMEOUT_MS,
    requestDeadlineMs: e.REQUEST_DEADLINE_MS,
    redisDurability: e.REDIS_DURABILITY,
    postgresConnectTimeoutMs: e.POSTGRES_CONNECT_TIMEOUT_MS,
    postgresStatementTimeoutMs: e.POSTGRES_STATEMENT_TIMEOUT_MS,
    readinessTimeoutMs: e.READINESS_TIMEOUT_MS,
    views: { flushIntervalMs: e.VIEWS_FLUSH_INTERVAL_MS, flushPosts: e.VIEWS_FLUSH_POSTS },
    live: {
      intervalMs: e.LIVE_INTERVAL_MS,
      maxConnections: e.LIVE_MAX_CONNECTIONS,
      maxSubscriptions: e.LIVE_MAX_SUBSCRIPTIONS,
      maxPosts: e.LIVE_MAX_POSTS,
      sendTimeoutMs: e.LIVE_SEND_TIMEOUT_MS,
      maxBufferedBytes: e.LIVE_MAX_BUFFERED_BYTES,
    },
    amqpUrl: e.AMQP_URL,
    jwtSecret: e.JWT_SECRET,
    port: e.PORT,
    host: e.HOST,
    logLevel: e.LOG_LEVEL,
    production: e.NODE_ENV === "production",
    redisPartitions: e.REDIS_PARTITIONS,
    tokenTtlSeconds: e.TOKEN_TTL_SECONDS,
    pipeline: e.PIPELINE,
    webConcurrency: e.WEB_CONCURRENCY ?? availableParallelism(),
    rabbitmq: Object.freeze({ prefix: e.RABBITMQ_PREFIX, queueType: e.RABBITMQ_QUEUE_TYPE, publishTimeoutMs: e.RABBITMQ_PUBLISH_TIMEOUT_MS }),
    persist: Object.freeze({
      queues: e.PERSIST_QUEUES,
      retryDelayMs: e.PERSIST_RETRY_DELAY_MS,
      batchSize: e.PERSIST_BATCH_SIZE,
      lingerMs: e.PERSIST_LINGER_MS,
      maxEventsPerSecond: e.PERSIST_MAX_EVENTS_PER_SECOND,
    }),
    relay: Object.freeze({
      batchSize: e.RELAY_BATCH_SIZE,
      lingerMs: e.RELAY_LINGER_MS,
      claimIdleMs: e.RELAY_CLAIM_IDLE_MS,
      outboxWarnLength: e.OUTBOX_WARN_LENGTH,
    }),
    ranking: Object.freeze({ refreshMs: e.RANKING_REFRESH_MS, refreshGapMs: e.RANKING_REFRESH_GAP_MS, cacheMs: e.RANKING_CACHE_MS }),
    hotCountsTargets: e.HOT_COUNTS_TARGETS,
    reconcile: Object.freeze({
      cron: e.RECONCILE_CRON === "off" ? null : e.RECONCILE_CRON,
      batchSize: e.RECONCILE_BATCH_SIZE,
      memberChunk: e.RECONCILE_MEMBER_CHUNK,
      coldAfterSeconds: e.COLD_TARGET_IDLE_SECONDS,
    }),
    rebuilds: Object.freeze({ atOnce: e.REBUILDS_AT_ONCE, maxWaiting: e.REBUILDS_WAITING }),
    metricsPort: e.METRICS_PORT,
    limits: Object.freeze({
      bodyBytes: e.MAX_BODY_BYTES,
      depth: e.MAX_QUERY_DEPTH,
      cost: e.MAX_QUERY_COST,
      aliases: e.MAX_ALIASES,
      mutations: e.MAX_MUTATIONS,
      variableValues: e.MAX_VARIABLE_VALUES,
    }),
    jwt: Object.freeze({ clockToleranceSeconds: e.JWT_CLOCK_TOLERANCE_SECONDS, issuer: e.JWT_ISSUER, audience: e.JWT_AUDIENCE }),
    trustProxy: parseTrustProxy(e.TRUST_PROXY),
    rateLimits: Object.freeze({
      enabled: e.RATE_LIMITS === "on",
      userMutations: e.RATE_LIMIT_USER_MUTATIONS,
      ipMutations: e.RATE_LIMIT_IP_MUTATIONS,
      ipSignIns: e.RATE_LIMIT_IP_SIGN_INS,
      usernameLogins: e.RATE_LIMIT_USERNAME_LOGINS,
      queryCostThreshold: e.RATE_LIMIT_QUERY_COST_THRESHOLD,
      viewerQueryCost: e.RATE_LIMIT_VIEWER_QUERY_COST,
      ipQueryCost: e.RATE_LIMIT_IP_QUERY_COST,
      localSubjects: e.RATE_LIMIT_LOCAL_SUBJECTS,
    }),
    httpKeepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT_MS,
    corsOrigins: corsOrigins(e.CORS_ORIGINS, e.NODE_ENV === "production"),
    tracing: e.OTEL_EXPORTER_OTLP_ENDPOINT ? Object.freeze({ endpoint: e.OTEL_EXPORTER_OTLP_ENDPOINT, serviceName: e.OTEL_SERVICE_NAME }) : null,
  });
}

function corsOrigins(setting: string | undefined, production: boolean): "*" | readonly string[] {
  if (setting === undefined) return production ? Object.freeze([]) : "*";
  const origins = setting.split(",").map((s) => s.trim()).filter(Boolean);
  if (origins.includes("*")) return "*";
  for (const origin of origins) {
    // Browsers send the Origin header as scheme://host[:port], so only that form can ever match.
    if (!/^https?:\/\/[^/\s]+$/.test(origin) || !URL.canParse(origin)) throw new Error(`Invalid configuration in the environment:\n  CORS_ORIGINS: "${origin}" is not an origin such as https://example.com (scheme and host, no path), nor "*".`);
  }
  // As browsers write the Origin header: a lower-case host, no default port.
  return Object.freeze(origins.map((origin) => new URL(origin).origin));
}
