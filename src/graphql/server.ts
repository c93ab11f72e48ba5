// GraphQL over HTTP: Apollo Server on Fastify, executing with graphql-jit.
// Fastify rather than Apollo's standalone server, so that other routes (health,
// WebSockets) and limits such as the body's can share the port with /graphql.
import { ApolloServer, type ApolloServerPlugin } from "@apollo/server";
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginInlineTraceDisabled,
  ApolloServerPluginLandingPageDisabled,
} from "@apollo/server/plugin/disabled";
import { fastifyApolloDrainPlugin } from "@as-integrations/fastify";
import fastifyCors from "@fastify/cors";
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import type { GraphQLSchema } from "graphql";
import type { Logger } from "pino";
import type { Services } from "../domain/services.js";
import { authenticationPlugin } from "./plugins/authentication-plugin.js";
import { deadlinePlugin } from "./plugins/deadline-plugin.js";
import type { ApiMetrics } from "./api-metrics.js";
import { createContext, defaultContentDeadlineMs, type Context } from "./context.js";
import { registerExplorer } from "./explorer.js";
import { createFormatError } from "./format-error.js";
import { installHttpErrorHandlers } from "./http-errors.js";
import { originPolicy } from "./origins.js";
import type { Readiness } from "./readiness.js";
import { registerGraphQLRoute } from "./graphql-route.js";
import { jitExecution } from "./jit-executor.js";
import { attachLiveServer, type LiveServer } from "./live/live-server.js";
import { requestLimitsPlugin, type RequestLimitsOptions } from "./limits/request-limits-plugin.js";
import { chargeOperation, rateLimitPlugin } from "./plugins/rate-limit-plugin.js";
import { unavailablePlugin } from "./plugins/unavailable-plugin.js";
import { operationFactsPlugin, type OperationFacts } from "./plugins/operation-facts.js";
import { apolloPersistedQueries, inSafelist, refuseOutsideSafelist, type PersistedQueries } from "./persisted-queries.js";
import { requestIdOf } from "./request-id.js";
import { createRequestLog } from "./request-log.js";
import { createSchema } from "./schema.js";

export interface GraphQLServerOptions {
  readonly logger: Logger;
  readonly introspection: boolean;
  /** Tells errors of a store that did not answer (SERVICE_UNAVAILABLE) from faults. */
  readonly isUnavailable: (error: unknown) => boolean;
  /** How long a request may take before it answers SERVICE_UNAVAILABLE (REQUEST_DEADLINE_MS); default 1,000 ms. */
  readonly requestDeadlineMs?: number;
  /** The same for operations that only create content or sign in (CONTENT_DEADLINE_MS); default 5,000 ms. */
  readonly contentDeadlineMs?: number;
  /** What GET /health/ready reports: 200 when every dependency answers, else 503 naming those that do not. */
  readonly readiness: Readiness;
  /** What one request may ask for (MAX_* settings), checked before anything executes. */
  readonly limits: RequestLimitsOptions["limits"] & { readonly bodyBytes: number };
  /** Charges an operation once it passed the limits; its error is the response. Default: the rate budgets' chargeOperation. */
  readonly onCost?: RequestLimitsOptions["onCost"];
  /** Fastify's `trustProxy` (TRUST_PROXY): whether and which proxies' X-Forwarded-For names the client; default false. */
  readonly trustProxy?: boolean | number | string[];
  /** How long an idle keep-alive connection stays open, in milliseconds; default 72,000 (above load balancers' 60–65 s). */
  readonly keepAliveTimeoutMs?: number;
  /** Origins browsers may call from, over HTTP and WebSocket: "*" for any; default none (no CORS headers, no WebSocket from a page). */
  readonly corsOrigins?: "*" | readonly string[];
  /** Where each request's duration, errors and store latencies are counted; default none. */
  readonly metrics?: ApiMetrics;
  /** GraphiQL for browsers at GET /graphql, from the service's own files (EXPLORER); default off. */
  readonly explorer?: boolean;
  /** Automatic persisted queries shared by every process, a safelist, or none (PERSISTED_QUERIES). */
  readonly persistedQueries: PersistedQueries;
  /** More Apollo plugins (tracing). */
  readonly plugins?: readonly ApolloServerPlugin<Context>[];
  /** Bounds of subscriptions over WebSocket (LIVE_* settings); served when the services have live counts. */
  readonly live?: {
    readonly subscribesPerSecond?: number;
    readonly maxConnections: number;
    readonly maxSubscriptions: number;
    readonly sendTimeoutMs: number;
    readonly maxBufferedBytes: number;
    readonly keepAliveMs?: number;
  };
}

export interface ServingApi {
  /** Where GraphQL is served: `${url}graphql`. */
  readonly url: string;
  /** Subscriptions over WebSocket, when served. */
  readonly live: LiveServer | null;
  /** Closes WebSocket connections (1001), stops taking requests and lets those in flight finish. */
  close(): Promise<void>;
}

/**
 * The Fastify request a context was made for, so that each operation's facts reach
 * the request log. A symbol key: it survives Apollo's shallow copy of the context
 * (a WeakMap keyed by the context would not) and stays out of resolvers' way.
 */
const httpRequest = Symbol("httpRequest");
type HttpContext = Context & { readonly [httpRequest]?: FastifyRequest };

/** What the steps of the wiring share: the server, its options, and what each request's log line is made of. */
interface Wiring {
  readonly http: FastifyInstance;
  readonly options: GraphQLServerOptions;
  readonly schema: GraphQLSchema;
  /** The code an answer of the HTTP layer carried (a body that is not JSON, too large, no such route). */
  readonly transportCodes: WeakMap<FastifyRequest, string>;
  readonly operations: WeakMap<FastifyRequest, OperationFacts>;
  readonly allowsOrigin: (origin: string) => boolean;
}

type FormatError = ReturnType<typeof createFormatError>;

function createHttp(options: GraphQLServerOptions): FastifyInstance {
  const keepAliveTimeout = options.keepAliveTimeoutMs ?? 72_000;
  const { trustProxy = false } = options;
  const http = Fastify({
    bodyLimit: options.limits.bodyBytes,
    // A hop count as the function Fastify would make of it (its types take no number).
    trustProxy: typeof trustProxy === "number" ? (_address: string, hop: number) => hop < trustProxy : trustProxy,
    // Fastify's own per-request lines stay off: the request log below writes one line per request.
    logger: false,
    genReqId: requestIdOf,
    keepAliveTimeout,
    // Bounds on a slow client: the headers within 10 s, the whole request within 30 s. An idle
    // keep-alive connection is under neither (Node starts both clocks at a request's first byte).
    requestTimeout: 30_000,
  });
  http.server.headersTimeout = 10_000;
  return http;
}

function installRequestHooks({ http, options, transportCodes, operations }: Wiring): void {
  // Hooks in callback style: an async hook costs a promise and a microtask per request.
  http.addHook("onRequest", (request, reply, done) => {
    void reply.header("x-request-id", request.id);
    done();
  });
  const requestLog = createRequestLog({ logger: options.logger });
  http.addHook("onResponse", (request, reply, done) => {
    // CORS preflights carry no operation: counting them would read as failed GraphQL requests.
    // Nor are the explorer's pages (HTML) GraphQL requests.
    const graphql = request.url === "/graphql" || request.url.startsWith("/graphql?");
    if (graphql && request.method !== "OPTIONS" && !String(reply.getHeader("content-type") ?? "").startsWith("text/html")) {
      const facts = { requestId: request.id, clientIp: request.ip, status: reply.statusCode, durationMs: reply.elapsedTime };
      const transportCode = transportCodes.get(request);
      const operation =
        operations.get(request) ?? (transportCode ? { operationName: null, operationType: null, errorCodes: [transportCode], viewerId: null } : undefined);
      requestLog(facts, operation);
      options.metrics?.observeRequest(facts, operation);
    }
    done();
  });
}

async function registerCors({ http, options, allowsOrigin }: Wiring): Promise<void> {
  if (options.corsOrigins === "*" || (options.corsOrigins ?? []).length > 0) {
    await http.register(fastifyCors, {
      // An origin not allowed gets no CORS headers at all; its preflight falls through to the 204 below.
      origin: options.corsOrigins === "*" ? "*" : (origin, allow) => allow(null, origin !== undefined && allowsOrigin(origin) ? origin : false),
      methods: ["GET", "POST", "OPTIONS"],
      exposedHeaders: ["x-request-id", "retry-after", "ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"],
      // Browsers may reuse a preflight's answer for 10 minutes.
      maxAge: 600,
    });
  }
  // A preflight CORS did not answer (an origin not allowed, or none configured): a plain 204
  // without Access-Control-Allow-Origin, which the browser reads as a refusal.
  http.options("/graphql", (_request, reply) => reply.code(204).header("content-length", "0").send());
}

function restrictBodies({ http, options, transportCodes }: Wiring): void {
  // JSON only: a POST of a "simple" media type (what a page may send another origin without a
  // preflight) is refused before it runs, which keeps mutations, POST-only, out of reach of
  // cross-site forms. GET carries queries alone: Apollo answers a mutation over GET 405.
  http.removeContentTypeParser("text/plain");
  if (options.persistedQueries.mode === "safelist") {
    refuseOutsideSafelist(http, options.persistedQueries.operations, (request, code) => transportCodes.set(request, code));
  }
}

function createApollo({ http, options, schema, operations }: Wiring, formatError: FormatError): ApolloServer<Context> {
  const execution = jitExecution(schema, { deadlineOf: (context) => (context as Context).deadlineAtMs });
  return new ApolloServer<Context>({
    gateway: execution.gateway,
    stringifyResult: execution.stringifyResult,
    introspection: options.introspection,
    // Off, so that clients' GET queries (urql's default) need no extra header: what Apollo's check
    // guards, side effects of requests a page may send cross-site without a preflight, cannot happen
    // here (mutations only as POST of JSON, above), and tokens travel in Authorization, never cookies.
    csrfPrevention: false,
    // "Did you mean …?" suggestions would describe the schema that turning introspection off hides.
    hideSchemaDetailsFromClientErrors: !options.introspection,
    includeStacktraceInErrorResponses: false,
    // The entry point owns signals and closes everything in order; Apollo's own handler would race it.
    stopOnTerminationSignals: false,
    formatError,
    // A bound on document size: no legitimate query of this schema comes near it.
    parseOptions: { maxTokens: 5_000 },
    persistedQueries: apolloPersistedQueries(options.persistedQueries),
    plugins: [
      // Stopping Apollo closes Fastify, letting requests in flight finish.
      fastifyApolloDrainPlugin(http),
      // Counts change every moment, so no response carries cache hints; the plugin
      // would otherwise wrap every field resolver, compiled ones included.
      ApolloServerPluginCacheControlDisabled(),
      // Apollo turns on federated tracing (ftv1) for a subgraph schema; its per-field timings come
      // from graphql-js's executor, which graphql-jit replaces here, so it would only cost.
      // Routers see this service's spans through OpenTelemetry instead.
      ApolloServerPluginInlineTraceDisabled(),
      // Apollo's landing page loads from a CDN; browsers get explorer.ts's page instead.
      ApolloServerPluginLandingPageDisabled(),
      authenticationPlugin(),
      deadlinePlugin(options.contentDeadlineMs ?? defaultContentDeadlineMs),
      // Budgets are spent by the limits' onCost hook, so only operations the limits let through pay.
      requestLimitsPlugin({ schema, limits: options.limits, onCost: options.onCost ?? chargeOperation }),
      rateLimitPlugin(),
      unavailablePlugin(),
      operationFactsPlugin((context, facts) => {
        const request = (context as HttpContext)[httpRequest];
        if (request) operations.set(request, facts);
      }),
      ...(options.plugins ?? []),
    ],
  });
}

function registerRoutes({ http, options, transportCodes }: Wiring, services: Services, apollo: ApolloServer<Context>): void {
  // Liveness says only that the process serves HTTP: restarting it would not cure a stalled store.
  http.get("/health/live", async () => ({ status: "live" }));
  http.get("/health/ready", async (_request, reply) => {
    const report = await options.readiness();
    const status = !report.ready ? "unavailable" : report.degraded ? "degraded" : "ready";
    return reply.code(report.ready ? 200 : 503).send({ status, checks: report.checks });
  });
  registerExplorer(http, { enabled: options.explorer ?? false, sent: (request, code) => transportCodes.set(request, code) });
  registerGraphQLRoute(http, apollo, {
    context: async (request) => {
      // The request is added to the context made, not copied with it into another object.
      const context: HttpContext = await createContext(services, request.headers.authorization, request.ip, options.requestDeadlineMs);
      (context as { [httpRequest]?: FastifyRequest })[httpRequest] = request;
      return context;
    },
  });
}

/** Subscriptions over WebSocket, when the services have live counts and the options bound them. */
function attachLive({ http, options, schema, allowsOrigin }: Wiring, services: Services, formatError: FormatError): LiveServer | null {
  // Upgrades to WebSocket on /graphql go to graphql-ws; Fastify never sees them.
  const live =
    services.live && options.live
      ? attachLiveServer(http.server, {
          schema,
          services,
          logger: options.logger,
          limits: options.limits,
          formatError,
          isUnavailable: options.isUnavailable,
          allowsOrigin,
          ...(options.persistedQueries.mode === "safelist" && { inSafelist: inSafelist(options.persistedQueries.operations) }),
          ...options.live,
          ...(options.metrics && { onDroppedClient: options.metrics.observeDroppedClient }),
        })
      : null;
  if (live && services.live && options.metrics) {
    const counts = services.live;
    options.metrics.watchLive(() => ({ connections: live.connections(), subscriptions: counts.stats().streams, posts: counts.stats().posts }));
  }
  return live;
}

/** Serves GraphQL over HTTP at `http://host:port/graphql`. */
export async function serveGraphQL(services: Services, options: GraphQLServerOptions & { readonly host: string; readonly port: number }): Promise<ServingApi> {
  const http = createHttp(options);
  const transportCodes = new WeakMap<FastifyRequest, string>();
  installHttpErrorHandlers(http, options.logger, options.limits.bodyBytes, (request, code) => transportCodes.set(request, code));
  const wiring: Wiring = {
    http,
    options,
    schema: createSchema(),
    transportCodes,
    operations: new WeakMap<FastifyRequest, OperationFacts>(),
    allowsOrigin: originPolicy(options.corsOrigins ?? []),
  };
  installRequestHooks(wiring);
  await registerCors(wiring);
  restrictBodies(wiring);
  const formatError = createFormatError(options.logger, options.isUnavailable);
  const apollo = createApollo(wiring, formatError);
  await apollo.start();
  registerRoutes(wiring, services, apollo);
  const live = attachLive(wiring, services, formatError);
  await http.listen({ host: options.host, port: options.port });
  const address = http.server.address();
  const port = typeof address === "object" && address ? address.port : options.port;
  return {
    url: `http://${options.host}:${port}/`,
    live,
    async close() {
      // Upgraded sockets would keep the HTTP server from closing: they go first.
      await live?.close();
      services.live?.close();
      await apollo.stop();
    },
  };
}
