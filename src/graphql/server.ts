import { readFileSync } from "node:fs";
import { ApolloServer } from "@apollo/server";
import { ApolloServerPluginCacheControlDisabled } from "@apollo/server/plugin/disabled";
import { startStandaloneServer } from "@apollo/server/standalone";
import type { Logger } from "pino";
import type { Services } from "../domain/services.js";
import { createContext, type Context } from "./context.js";
import { createFormatError } from "./format-error.js";
import { Mutation } from "./resolvers/mutation.js";
import { Query } from "./resolvers/query.js";
import { DateTime } from "./resolvers/scalars.js";
import { Comment, CommentCounts, Post, PostCounts, User, UserCounts } from "./resolvers/types.js";

export const typeDefs = readFileSync(new URL("../../schema.graphql", import.meta.url), "utf8");

export const resolvers = { DateTime, Query, Mutation, Post, PostCounts, Comment, CommentCounts, User, UserCounts };

export interface GraphQLServerOptions {
  readonly logger: Logger;
  readonly introspection: boolean;
}

export function createGraphQLServer({ logger, introspection }: GraphQLServerOptions): ApolloServer<Context> {
  return new ApolloServer<Context>({
    typeDefs,
    resolvers,
    introspection,
    includeStacktraceInErrorResponses: false,
    // The entry point owns signals and closes everything in order; Apollo's own handler would race it.
    stopOnTerminationSignals: false,
    formatError: createFormatError(logger),
    // A bound on document size: no legitimate query of this schema comes near it.
    parseOptions: { maxTokens: 5_000 },
    // Counts change every moment, so no response carries cache hints; the plugin
    // would otherwise hook every resolved field (some 800 in a feed of 100 posts).
    plugins: [ApolloServerPluginCacheControlDisabled()],
  });
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
  const apollo = createGraphQLServer(options);
  const { url } = await startStandaloneServer(apollo, {
    listen: { port: options.port, host: options.host },
    context: ({ req }) => createContext(services, req),
  });
  return { url, close: () => apollo.stop() };
}
