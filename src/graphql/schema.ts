// The executable schema: the contract in schema.graphql with this service's resolvers.
import { readFileSync } from "node:fs";
import { makeExecutableSchema } from "@graphql-tools/schema";
import type { GraphQLSchema } from "graphql";
import { Mutation } from "./resolvers/mutation.js";
import { Query } from "./resolvers/query.js";
import { DateTime } from "./resolvers/scalars.js";
import { Subscription } from "./resolvers/subscription.js";
import { Comment, CommentCounts, Post, PostCounts, User, UserCounts } from "./resolvers/types.js";

export const typeDefs = readFileSync(new URL("../../schema.graphql", import.meta.url), "utf8");

export const resolvers = { DateTime, Query, Mutation, Subscription, Post, PostCounts, Comment, CommentCounts, User, UserCounts };

export function createSchema(): GraphQLSchema {
  return makeExecutableSchema({ typeDefs, resolvers });
}
