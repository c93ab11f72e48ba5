// The only reader of process.env. Each setting is declared once, at the place it takes in
// Config, with the variable it is read from and how that is parsed and checked; one zod
// schema reads them all, and Config is what that schema gives.
import { availableParallelism } from "node:os";
import { z } from "zod";
import { addresses, parseCorsOrigins, parseTrustProxy, withPgOptions, type TrustProxy } from "./config/parsers.js";

export type { TrustProxy };

/** A setting: the environment variable it is read from, and the schema that parses it. */
class Setting<S extends z.ZodType> {
  constructor(
    readonly variable: string,
    readonly schema: S,
  ) {}
}
const setting = <S extends z.ZodType>(variable: string, schema: S) => new Setting(variable, schema);

interface Settings {
  readonly [key: string]: Setting<z.ZodType> | Settings;
}

/** What a tree of settings reads as: the same keys, each setting replaced by its parsed value. */
type Read<T> = T extends Setting<infer S> ? z.output<S> : { readonly [K in keyof T]: Read<T[K]> };

const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);
const nonNegativeInt = (fallback: number) => z.coerce.number().int().min(0).default(fallback);
/** Public, so refused in production (see configSchema). */
const developmentJwtSecret = "dev-secret-change-me-in-production";

const settings = {
  databaseUrl: setting("DATABASE_URL", z.url().default("postgresql://postgres@127.0.0.1:5432/likes")),
  /** libpq's session options, given with the service's own to every connection (stores/postgres/session-options.ts). */
  pgOptions: setting("PGOPTIONS", z.string().default("")),
  /** Node's, read by npm start's supervisor: a young generation size given there is kept (process/supervisor.ts). */
  nodeOptions: setting("NODE_OPTIONS", z.string().default("")),
  redisUrl: setting("REDIS_URL", z.url().default("redis://127.0.0.1:6379")),
  /** Comma-separated seed nodes; when set, Redis is used in cluster mode. */
  redisClusterNodes: setting("REDIS_CLUSTER_NODES", addresses()),
  /** Redis Sentinels; when set, the primary they name REDIS_SENTINEL_NAME is used (REDIS_URL: credentials and database). */
  redisSentinels: setting("REDIS_SENTINELS", addresses()),
  redisSentinelName: setting("REDIS_SENTINEL_NAME", z.string().min(1).default("mymaster")),
  /** How many replicas must hold a like, unlike, collect or follow before it is answered (Redis's WAIT); 0: the primary's word. */
  redisReplicaAcks: setting("REDIS_REPLICA_ACKS", nonNegativeInt(0)),
  /** How long a Redis command may go unanswered before it fails (a stalled Redis answers nothing). */
  redisCommandTimeoutMs: setting("REDIS_COMMAND_TIMEOUT_MS", positiveInt(1000)),
  /** How long a GraphQL request may take before it answers SERVICE_UNAVAILABLE; every store call of the request inherits it. */
  requestDeadlineMs: setting("REQUEST_DEADLINE_MS", positiveInt(1000)),
  /** The same for operations that only create content or sign in: PostgreSQL-bound, they may queue for a connection or a password hash. */
  contentDeadlineMs: setting("CONTENT_DEADLINE_MS", positiveInt(5000)),
  /** "volatile" accepts a Redis without AOF or replicas (a restart loses what the outbox holds); "durable" warns of it, and refuses it in production. */
  redisDurability: setting("REDIS_DURABILITY", z.enum(["durable", "volatile"]).default("durable")),
  /**
   * Hash partitions of likes, collects, follows and relation_versions, chosen when `npm run migrate`
   * partitions them (docs/scaling.md); a database keeps the count it was migrated with.
   */
  relationPartitions: setting("RELATION_PARTITIONS", z.coerce.number().int().min(1).max(1024).default(16)),
  /** How long getting a PostgreSQL connection may take. */
  postgresConnectTimeoutMs: setting("POSTGRES_CONNECT_TIMEOUT_MS", positiveInt(3000)),
  /** How long a PostgreSQL statement may run before it is cancelled (the client gives up a second later). */
  postgresStatementTimeoutMs: setting("POSTGRES_STATEMENT_TIMEOUT_MS", positiveInt(10_000)),
  /** How long each dependency may take to answer a readiness probe (GET /health/ready). */
  readinessTimeoutMs: setting("READINESS_TIMEOUT_MS", positiveInt(1000)),
  views: {
    /** Views wait in an API process at most this long before they go to Redis (what a crash of the process may lose). */
    flushIntervalMs: setting("VIEWS_FLUSH_INTERVAL_MS", z.coerce.number().int().min(50).max(60_000).default(1_000)),
    /** Posts with views waiting that make a process flush at once. */
    flushPosts: setting("VIEWS_FLUSH_POSTS", z.coerce.number().int().min(1).max(100_000).default(1_000)),
  },
  live: {
    /** Live counts (graphql-ws): the shortest time between two messages about one post. */
    intervalMs: setting("LIVE_INTERVAL_MS", z.coerce.number().int().min(100).max(60_000).default(1_000)),
    /** WebSocket connections one API process keeps at most; more are refused at the upgrade (HTTP 503). */
    maxConnections: setting("LIVE_MAX_CONNECTIONS", positiveInt(10_000)),
    /** Subscribe messages one connection may send a second (a burst of as many); more answer RATE_LIMITED. */
    subscribesPerSecond: setting("LIVE_SUBSCRIBES_PER_SECOND", positiveInt(10)),
    /** Subscriptions one connection may hold at once (each watches at most 100 posts). */
    maxSubscriptions: setting("LIVE_MAX_SUBSCRIPTIONS", positiveInt(10)),
    /** Distinct posts one API process watches at most, over all its subscriptions. */
    maxPosts: setting("LIVE_MAX_POSTS", positiveInt(100_000)),
    /** A client that has not taken a message this long, or lets more than LIVE_MAX_BUFFERED_BYTES wait, is dropped. */
    sendTimeoutMs: setting("LIVE_SEND_TIMEOUT_MS", positiveInt(5_000)),
    maxBufferedBytes: setting("LIVE_MAX_BUFFERED_BYTES", positiveInt(1024 * 1024)),
  },
  amqpUrl: setting("AMQP_URL", z.url().default("amqp://guest:guest@127.0.0.1:5672")),
  /** Unset: the development default, which production refuses. */
  jwtSecret: setting("JWT_SECRET", z.string().min(16, "JWT_SECRET must be at least 16 characters").optional()),
  port: setting("PORT", z.coerce.number().int().min(0).max(65535).default(4000)),
  host: setting("HOST", z.string().default("127.0.0.1")),
  logLevel: setting("LOG_LEVEL", z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info")),
  production: setting(
    "NODE_ENV",
    z
      .string()
      .default("development")
      .transform((v) => v === "production"),
  ),
  /** Redis key partitions: fixed per deployment, since every key embeds its partition. */
  redisPartitions: setting("REDIS_PARTITIONS", positiveInt(1024)),
  tokenTtlSeconds: setting("TOKEN_TTL_SECONDS", positiveInt(7 * 24 * 3600)),
  /** Whether `npm start` also runs the persistence pipeline, in one process beside the API's. */
  pipeline: setting("PIPELINE", z.enum(["embedded", "off"]).default("embedded")),
  /** API processes `npm start` runs, sharing the port: one per core unless set. */
  webConcurrency: setting(
    "WEB_CONCURRENCY",
    z.coerce
      .number()
      .int()
      .min(1)
      .max(256)
      .default(() => availableParallelism()),
  ),
  rabbitmq: {
    /** Prefix of the exchange, queues and routing keys, so deployments can share a broker. */
    prefix: setting(
      "RABBITMQ_PREFIX",
      z
        .string()
        .regex(/^[a-z][a-z0-9_-]*$/, "RABBITMQ_PREFIX must be lower-case letters, digits, _ or -")
        .default("likes"),
    ),
    queueType: setting("RABBITMQ_QUEUE_TYPE", z.enum(["quorum", "classic"]).default("quorum")),
    /** How long a publish may wait for the broker's confirm before it counts as failed. */
    publishTimeoutMs: setting("RABBITMQ_PUBLISH_TIMEOUT_MS", positiveInt(5_000)),
  },
  persist: {
    /** Changing it on a running deployment: see src/stores/rabbitmq/partitioning.ts (refused while unsafe). */
    queues: setting("PERSIST_QUEUES", positiveInt(2)),
    /** How long a change PostgreSQL refused waits in the retry queue before it is applied again. */
    retryDelayMs: setting("PERSIST_RETRY_DELAY_MS", positiveInt(30_000)),
    batchSize: setting("PERSIST_BATCH_SIZE", positiveInt(1000)),
    lingerMs: setting("PERSIST_LINGER_MS", positiveInt(1000)),
    /** Likes applied to PostgreSQL per second at most; 0 means no cap. */
    maxEventsPerSecond: setting("PERSIST_MAX_EVENTS_PER_SECOND", nonNegativeInt(0)),
  },
  relay: {
    batchSize: setting("RELAY_BATCH_SIZE", positiveInt(1000)),
    /** After a read that did not fill a batch, the relay waits this long for more entries. */
    lingerMs: setting("RELAY_LINGER_MS", z.coerce.number().int().min(0).max(1000).default(50)),
    /** Outbox entries pending longer than this on a relay that stopped are taken over. */
    claimIdleMs: setting("RELAY_CLAIM_IDLE_MS", positiveInt(30_000)),
    outboxWarnLength: setting("OUTBOX_WARN_LENGTH", positiveInt(10_000)),
  },
  /**
   * Hot ranking: workers sum its windows at least this often (and after batches, at most once per gap);
   * API processes may answer a window's post ids from memory for up to RANKING_CACHE_MS (0: never).
   */
  ranking: {
    refreshMs: setting("RANKING_REFRESH_MS", z.coerce.number().int().min(100).max(600_000).default(10_000)),
    refreshGapMs: setting("RANKING_REFRESH_GAP_MS", z.coerce.number().int().min(0).max(60_000).default(250)),
    cacheMs: setting("RANKING_CACHE_MS", z.coerce.number().int().min(0).max(500).default(250)),
  },
  /** Counter hashes an API process keeps in memory (hot-counts.ts); 0 keeps none. */
  hotCountsTargets: setting("HOT_COUNTS_TARGETS", z.coerce.number().int().min(0).max(10_000_000).default(100_000)),
  reconcile: {
    /** When the worker runs a reconcile pass: a cron expression, or "off" (null). */
    cron: setting(
      "RECONCILE_CRON",
      z
        .string()
        .default("0 3 * * *")
        .transform((v) => (v === "off" ? null : v)),
    ),
    batchSize: setting("RECONCILE_BATCH_SIZE", positiveInt(200)),
    /** Members a reconcile pass loads at once: bigger targets are compared in pieces of this size. */
    memberChunk: setting("RECONCILE_MEMBER_CHUNK", positiveInt(10_000)),
    /** Targets idle this long leave Redis during a reconcile pass (rebuilt on next use); 0 keeps all. */
    coldAfterSeconds: setting("COLD_TARGET_IDLE_SECONDS", nonNegativeInt(7 * 24 * 3600)),
  },
  /**
   * Targets one API process loads from PostgreSQL at once (each holds a connection for a snapshot),
   * and how many may wait for a slot (each no longer than its request's deadline); more are SERVICE_UNAVAILABLE.
   */
  rebuilds: {
    atOnce: setting("REBUILDS_AT_ONCE", positiveInt(4)),
    maxWaiting: setting("REBUILDS_WAITING", positiveInt(256)),
  },
  /**
   * Targets reads answered from PostgreSQL are loaded into Redis in the background, by each API
   * process at most this many a second, this many per PostgreSQL snapshot.
   */
  warmer: {
    perSecond: setting("WARM_TARGETS_PER_SECOND", positiveInt(250)),
    batchSize: setting("WARM_BATCH_SIZE", z.coerce.number().int().min(1).max(1_000).default(100)),
  },
  /** Prometheus metrics at http://HOST:METRICS_PORT/metrics; 0 turns them off. */
  metricsPort: setting("METRICS_PORT", z.coerce.number().int().min(0).max(65535).default(9464)),
  /** Request limits, checked before any resolver runs (docs/clients.md, "Limits"). */
  limits: {
    bodyBytes: setting("MAX_BODY_BYTES", positiveInt(100 * 1024)),
    depth: setting("MAX_QUERY_DEPTH", positiveInt(12)),
    cost: setting("MAX_QUERY_COST", positiveInt(5_000)),
    aliases: setting("MAX_ALIASES", positiveInt(30)),
    mutations: setting("MAX_MUTATIONS", positiveInt(10)),
    variableValues: setting("MAX_VARIABLE_VALUES", positiveInt(1_000)),
  },
  /** Tokens: accepted this long past `exp` (clocks disagree); `iss` / `aud` required and issued when set. */
  jwt: {
    clockToleranceSeconds: setting("JWT_CLOCK_TOLERANCE_SECONDS", z.coerce.number().int().min(0).max(300).default(30)),
    issuer: setting(
      "JWT_ISSUER",
      z
        .string()
        .optional()
        .transform((v) => v || undefined),
    ),
    audience: setting(
      "JWT_AUDIENCE",
      z
        .string()
        .optional()
        .transform((v) => v || undefined),
    ),
  },
  /** Whether X-Forwarded-For names the client: "false", "true" (any proxy), a hop count, or proxy addresses/CIDRs, comma-separated. */
  trustProxy: setting("TRUST_PROXY", z.string().default("false").transform(parseTrustProxy)),
  /** Rate budgets, in units per minute (a quiet client may spend a minute's worth at once); 0 leaves one unlimited. */
  rateLimits: {
    enabled: setting(
      "RATE_LIMITS",
      z
        .enum(["on", "off"])
        .default("on")
        .transform((v) => v === "on"),
    ),
    userMutations: setting("RATE_LIMIT_USER_MUTATIONS", nonNegativeInt(600)),
    ipMutations: setting("RATE_LIMIT_IP_MUTATIONS", nonNegativeInt(3000)),
    ipSignIns: setting("RATE_LIMIT_IP_SIGN_INS", nonNegativeInt(300)),
    usernameLogins: setting("RATE_LIMIT_USERNAME_LOGINS", nonNegativeInt(10)),
    /** Queries whose cost reaches the threshold are charged their cost; cheaper ones cost no budget (and no Redis call). */
    queryCostThreshold: setting("RATE_LIMIT_QUERY_COST_THRESHOLD", positiveInt(1000)),
    viewerQueryCost: setting("RATE_LIMIT_VIEWER_QUERY_COST", nonNegativeInt(100_000)),
    ipQueryCost: setting("RATE_LIMIT_IP_QUERY_COST", nonNegativeInt(500_000)),
    /**
     * Users and addresses whose mutation budgets one API process holds in memory at most (about 200 bytes
     * each; least recently charged forgotten first, losing only their units not yet reported to Redis).
     */
    localSubjects: setting("RATE_LIMIT_LOCAL_SUBJECTS", positiveInt(50_000)),
  },
  /**
   * How long an idle keep-alive connection stays open: above load balancers' idle timeouts
   * (60–65 s is common), so that the balancer, not the server, closes it and never reuses a closed one.
   */
  httpKeepAliveTimeoutMs: setting("HTTP_KEEP_ALIVE_TIMEOUT_MS", positiveInt(72_000)),
  /** GraphiQL for browsers at GET /graphql (src/graphql/explorer.ts): "on" or "off"; unset, off in production only. */
  explorer: setting("EXPLORER", z.enum(["on", "off"]).optional()),
  /**
   * Origins browsers may call the API from: comma-separated, or "*" for any. Unset: none in
   * production, any in development. "*" allows any origin; an empty list allows none.
   */
  corsOrigins: setting("CORS_ORIGINS", z.string().optional().transform(parseCorsOrigins)),
  /** "apq": automatic persisted queries kept in Redis for every process; "safelist": only the operations of an Apollo manifest; "off". */
  persistedQueries: {
    mode: setting("PERSISTED_QUERIES", z.enum(["apq", "safelist", "off"]).default("apq")),
    manifest: setting("PERSISTED_QUERIES_MANIFEST", z.string().min(1).optional()),
    /** Redis keeps a text this long after it was last registered or read there, and this many at most (least recently used go first). */
    ttlSeconds: setting("PERSISTED_QUERIES_TTL_SECONDS", positiveInt(86_400)),
    maxEntries: setting("PERSISTED_QUERIES_MAX_ENTRIES", positiveInt(5_000)),
  },
  /** Null without an endpoint: no tracing, and no tracing code loaded. */
  tracing: {
    /** OTLP/HTTP collector base URL (e.g. http://127.0.0.1:4318); when set, GraphQL operations are traced. */
    endpoint: setting("OTEL_EXPORTER_OTLP_ENDPOINT", z.url().optional()),
    serviceName: setting("OTEL_SERVICE_NAME", z.string().min(1).default("like-counter-service")),
  },
} satisfies Settings;

/**
 * The flat shape zod reads the environment with: each setting's variable and schema. Two settings
 * on one variable would both get one schema's value, so that is refused when the module loads.
 */
function shapeOf(tree: Settings, shape: Record<string, z.ZodType> = {}): Record<string, z.ZodType> {
  for (const node of Object.values(tree)) {
    if (!(node instanceof Setting)) shapeOf(node, shape);
    else if (node.variable in shape) throw new Error(`${node.variable} is read by two settings in src/config.ts; give each setting its own variable.`);
    else shape[node.variable] = node.schema;
  }
  return shape;
}

/** The parsed values, each where its setting sits in the tree, every object frozen. */
function read<T extends Settings>(tree: T, values: Record<string, unknown>): Read<T> {
  const entries = Object.entries(tree).map(([key, node]) => [key, node instanceof Setting ? values[node.variable] : read(node, values)]);
  return Object.freeze(Object.fromEntries(entries)) as Read<T>;
}

const shape = shapeOf(settings);

/** The environment in, the frozen Config out; the settings that depend on one another are settled here. */
const configSchema = z.object(shape).transform((values, ctx) => {
  const { jwtSecret, corsOrigins, explorer, tracing, databaseUrl, pgOptions, ...rest } = read(settings, values);
  const refuse = (variable: string, message: string) => ctx.issues.push({ code: "custom", path: [variable], input: undefined, message });
  if (rest.redisSentinels.length > 0 && rest.redisClusterNodes.length > 0)
    refuse("REDIS_SENTINELS", "REDIS_SENTINELS and REDIS_CLUSTER_NODES are both set; a Redis Cluster fails over by itself: set one of them.");
  if (rest.persistedQueries.mode === "safelist" && !rest.persistedQueries.manifest)
    refuse("PERSISTED_QUERIES_MANIFEST", "PERSISTED_QUERIES=safelist needs the manifest's path.");
  if (jwtSecret === undefined && rest.production) refuse("JWT_SECRET", "JWT_SECRET must be set in production; the development default is public.");
  return Object.freeze({
    ...rest,
    databaseUrl: withPgOptions(databaseUrl, pgOptions),
    jwtSecret: jwtSecret ?? developmentJwtSecret,
    corsOrigins: corsOrigins ?? (rest.production ? Object.freeze<string[]>([]) : "*"),
    explorer: explorer === undefined ? !rest.production : explorer === "on",
    tracing: tracing.endpoint === undefined ? null : Object.freeze({ endpoint: tracing.endpoint, serviceName: tracing.serviceName }),
  });
});

export type Config = z.output<typeof configSchema>;

/** Every setting's environment variable: docs/operations.md's table must name each, and only these. */
export const settingNames: readonly string[] = Object.freeze(Object.keys(shape));

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = configSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`).join("\n");
    throw new Error(`Invalid configuration in the environment:\n${problems}`);
  }
  return parsed.data;
}
