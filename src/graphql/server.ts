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
import { jitGateway } from "./jit-executor.js";
import { rateLimitPlugin } from "./rate-limit-plugin.js";
import { createSchema } from "./schema.js";

export interface GraphQLServerOptions {
  readonly logger: Logger;
  readonly introspection: boolean;
  /** Tells errors of a store that did not answer (SERVICE_UNAVAILABLE) from faults. */
  readonly isUnavailable: (error: unknown) => boolean;
  /** What GET /health/ready reports: 200 when every dependency answers, else 503 naming those that do not. */
  readonly readiness: Readiness;
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
  const http = Fastify({ trustProxy: typeof trustProxy === "number" ? (_address: string, hop: number) => hop < trustProxy : trustProxy });
  const apollo = new ApolloServer<Context>({
    gateway: jitGateway(createSchema()),
    introspection: options.introspection,
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
      // In this order: a bad token is refused before it spends any budget.
      authenticationPlugin(),
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
