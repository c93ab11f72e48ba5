// The executable schema: the contract in schema.graphql with this service's resolvers,
// built as an Apollo Federation 2 subgraph, so `_service` and `_entities` answer too.
import { readFileSync } from "node:fs";
import { buildSubgraphSchema } from "@apollo/subgraph";
import { parse, type GraphQLSchema } from "graphql";
import { resolveEntities } from "./resolvers/entities.js";
import { Mutation } from "./resolvers/mutation.js";
import { Query } from "./resolvers/query.js";
import { DateTime } from "./resolvers/scalars.js";
import { Subscription } from "./resolvers/subscription.js";
import { Comment, CommentCounts, Post, PostCounts, User, UserCounts } from "./resolvers/types.js";

export const typeDefs = readFileSync(new URL("../../schema.graphql", import.meta.url), "utf8");

export const resolvers = {
  DateTime,
  Query: { ...Query, _entities: resolveEntities },
  Mutation,
  Subscription,
  Post,
  PostCounts,
  Comment,
  CommentCounts,
  User,
  UserCounts,
};

type SubgraphModule = Extract<Parameters<typeof buildSubgraphSchema>[0], { resolvers?: unknown }>;

export function createSchema(): GraphQLSchema {
  // Each resolver's parameters are typed by what it receives, which the library's map type does not name.
  return buildSubgraphSchema({ typeDefs: parse(typeDefs), resolvers: resolvers as unknown as SubgraphModule["resolvers"] });
}
