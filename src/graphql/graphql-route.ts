// Apollo Server's route on Fastify, through Apollo's integration API
// (executeHTTPGraphQLRequest): what @as-integrations/fastify's handler does,
// without the work it repeats on every request that no answer depends on. Its
// handler parses each request's URL with `new URL` (about 2% of the API's CPU on
// `{ __typename }` under load, measured with perf) only to hand Apollo the query
// string, which Apollo reads for GET alone.
import { Readable } from "node:stream";
import { HeaderMap, type ApolloServer, type BaseContext, type HTTPGraphQLRequest } from "@apollo/server";
import type { FastifyInstance, FastifyRequest } from "fastify";

export interface GraphQLRouteOptions<C extends BaseContext> {
  /** Where GraphQL is served; default "/graphql". */
  readonly path?: string;
  /** Builds a request's context; an error it throws is answered as Apollo answers a failed context. */
  readonly context: (request: FastifyRequest) => Promise<C>;
}

/** The query string as `new URL(url).search` gives it: "" when there is none, which is every POST here. */
function searchOf(url: string): string {
  return url.includes("?") ? new URL(url, "http://localhost").search : "";
}

function headerMapOf(request: FastifyRequest): HeaderMap {
  const map = new HeaderMap();
  const { headers } = request;
  for (const name in headers) {
    const value = headers[name];
    if (value) map.set(name, Array.isArray(value) ? value.join(", ") : value);
  }
  return map;
}

/**
 * Apollo's context thunk for one request. Made here rather than written inline as
 * `context: () => …`: tsx compiles with esbuild's keepNames, which gives a function
 * assigned to a name or property its name with Object.defineProperty each time it is
 * made (about 350 ns a function, measured), and a returned function has none to keep.
 */
function contextThunk<C>(context: (request: FastifyRequest) => Promise<C>, request: FastifyRequest): () => Promise<C> {
  return () => context(request);
}

function toGraphQLRequest(request: FastifyRequest): HTTPGraphQLRequest {
  return { method: request.method.toUpperCase(), headers: headerMapOf(request), search: searchOf(request.url), body: request.body };
}

/** Serves `apollo` (started) at `path` for GET and POST; CORS preflights (OPTIONS) are server.ts's. */
export function registerGraphQLRoute<C extends BaseContext>(http: FastifyInstance, apollo: ApolloServer<C>, options: GraphQLRouteOptions<C>): void {
  apollo.assertStarted("registerGraphQLRoute()");
  const { context } = options;
  http.route({
    method: ["GET", "POST"],
    url: options.path ?? "/graphql",
    handler: async (request, reply) => {
      const { headers, status, body } = await apollo.executeHTTPGraphQLRequest({
        httpGraphQLRequest: toGraphQLRequest(request),
        context: contextThunk(context, request),
      });
      for (const [name, value] of headers) void reply.header(name, value);
      void reply.code(status ?? 200);
      if (body.kind === "complete") return body.string;
      return reply.send(Readable.from(body.asyncIterator));
    },
  });
}
