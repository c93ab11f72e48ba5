// GraphQL over HTTP: Apollo Server on Fastify, executing with graphql-jit.
// Fastify rather than Apollo's standalone server, so that other routes (health,
// WebSockets) and limits such as the body's can share the port with /graphql.
import { ApolloServer } from "@apollo/server";
import { ApolloServerPluginCacheControlDisabled } from "@apollo/server/plugin/disabled";
import fastifyApollo, { fastifyApolloDrainPlugin } from "@as-integrations/fastify";
import Fastify from "fastify";
import type { Logger } from "pino";
import type { Readiness } from "../domain/readiness.js";
import type { Services } from "../domain/services.js";
import { authenticationPlugin } from "./authentication-plugin.js";
import { createContext, type Context } from "./context.js";
import { createFormatError } from "./format-error.js";
import { installHttpErrorHandlers } from "./http-errors.js";
import { jitGateway } from "./jit-executor.js";
import { createRequestLimitsPlugin, type RequestLimitsOptions } from "./limits/request-limits-plugin.js";
import { chargeOperation, rateLimitPlugin } from "./rate-limit-plugin.js";
import { createSchema } from "./schema.js";

export interface GraphQLServerOptions {
  readonly logger: Logger;
  readonly introspection: boolean;
  /** Tells errors of a store that did not answer (SERVICE_UNAVAILABLE) from faults. */
  readonly isUnavailable: (error: unknown) => boolean;
  /** What GET /health/ready reports: 200 when every dependency answers, else 503 naming those that do not. */
  readonly readiness: Readiness;
  /** What one request may ask for (MAX_* settings), checked before anything executes. */
  readonly limits: RequestLimitsOptions["limits"] & { readonly bodyBytes: number };
  /** Charges an operation once it passed the limits; its error is the response. Default: the rate budgets' chargeOperation. */
  readonly onCost?: RequestLimitsOptions["onCost"];
  /** Fastify's `trustProxy` (TRUST_PROXY): whether and which proxies' X-Forwarded-For names the client; default false. */
  readonly trustProxy?: boolean | number | string[];
}

export interface ServingApi {
  /** Where GraphQL is served: `${url}graphql`. */
  readonly url: string;
  /** Stops taking requests and lets those in flight finish. */
  close(): Promise<void>;
}

/** Serves GraphQL over HTTP at `http://host:port/graphql`. */
export async function serveGraphQL(
  services: Services,
  options: GraphQLServerOptions & { readonly host: string; readonly port: number },
): Promise<ServingApi> {
  const { trustProxy = false } = options;
  // A hop count as the function Fastify would make of it (its types take no number).
  const http = Fastify({ bodyLimit: options.limits.bodyBytes, trustProxy: typeof trustProxy === "number" ? (_address: string, hop: number) => hop < trustProxy : trustProxy });
  installHttpErrorHandlers(http, options.logger, options.limits.bodyBytes);
  const schema = createSchema();
  const apollo = new ApolloServer<Context>({
    gateway: jitGateway(schema),
    introspection: options.introspection,
    // "Did you mean …?" suggestions would describe the schema that turning introspection off hides.
    hideSchemaDetailsFromClientErrors: !options.introspection,
    includeStacktraceInErrorResponses: false,
    // The entry point owns signals and closes everything in order; Apollo's own handler would race it.
    stopOnTerminationSignals: false,
    formatError: createFormatError(options.logger, options.isUnavailable),
    // A bound on document size: no legitimate query of this schema comes near it.
    parseOptions: { maxTokens: 5_000 },
    plugins: [
      // Stopping Apollo closes Fastify, letting requests in flight finish.
      fastifyApolloDrainPlugin(http),
      // Counts change every moment, so no response carries cache hints; the plugin
      // would otherwise wrap every field resolver, compiled ones included.
      ApolloServerPluginCacheControlDisabled(),
      authenticationPlugin(),
      // Budgets are spent by the limits' onCost hook, so only operations the limits let through pay.
      createRequestLimitsPlugin({ schema, limits: options.limits, onCost: options.onCost ?? chargeOperation }),
      rateLimitPlugin(),
    ],
  });
  await apollo.start();
  // Liveness says only that the process serves HTTP: restarting it would not cure a stalled store.
  http.get("/health/live", async () => ({ status: "live" }));
  http.get("/health/ready", async (_request, reply) => {
    const report = await options.readiness();
    return reply.code(report.ready ? 200 : 503).send({ status: report.ready ? "ready" : "unavailable", checks: report.checks });
  });
  await http.register(fastifyApollo(apollo), { context: async (request) => createContext(services, request.headers.authorization, request.ip) });
  await http.listen({ host: options.host, port: options.port });
  const address = http.server.address();
  const port = typeof address === "object" && address ? address.port : options.port;
  return { url: `http://${options.host}:${port}/`, close: () => apollo.stop() };
}
