// The running server serves exactly schema.graphql (as the federation subgraph it declares), and
// schema.graphql holds the whole contract.
import { readFileSync } from "node:fs";
import { buildSubgraphSchema } from "@apollo/subgraph";
import {
  buildClientSchema,
  buildSchema,
  getIntrospectionQuery,
  parse,
  printSchema,
  printType,
  type GraphQLNamedType,
  type IntrospectionQuery,
  isObjectType,
} from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "../../support/api.js";
import { dataOf } from "../../support/env.js";

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

/** The fields the design's contract names for each type; more may be added, none removed. */
const contract: Record<string, string[]> = {
  Query: ["viewer", "user", "post", "posts", "feed", "comment"],
  Mutation: [
    "register",
    "login",
    "createPost",
    "createComment",
    "likePost",
    "unlikePost",
    "likeComment",
    "unlikeComment",
    "recordViews",
    "collectPost",
    "uncollectPost",
    "followUser",
    "unfollowUser",
  ],
  AuthPayload: ["token", "user"],
  PostLikePayload: ["changed", "post"],
  CommentLikePayload: ["changed", "comment"],
  PostCollectPayload: ["changed", "post"],
  FollowPayload: ["changed", "user"],
  Post: ["id", "author", "title", "body", "createdAt", "counts", "viewerHasLiked", "viewerHasCollected", "likers", "comments"],
  PostCounts: ["likes", "reads", "comments", "collects"],
  Comment: ["id", "post", "author", "parent", "body", "createdAt", "counts", "viewerHasLiked", "replies"],
  CommentCounts: ["likes", "replies"],
  User: ["id", "username", "createdAt", "counts", "viewerFollows", "followers", "following", "likedPosts", "collectedPosts"],
  UserCounts: ["followers", "following", "posts", "likesReceived", "collectsReceived"],
  PostConnection: ["edges", "pageInfo"],
  CommentConnection: ["edges", "pageInfo"],
  UserConnection: ["edges", "pageInfo"],
};

/** schema.graphql alone, without the service's resolvers: the subgraph schema it declares. */
const subgraphOfFile = () => buildSubgraphSchema(parse(readFileSync("schema.graphql", "utf8")));

describe("GraphQL contract", () => {
  it("when the server is introspected, then it serves schema.graphql exactly", async () => {
    const introspection = dataOf(await api.gql<IntrospectionQuery>(getIntrospectionQuery({ directiveIsRepeatable: true })));
    // Scalars are compared without descriptions: a scalar's description lives with its resolver.
    const withoutScalarDescriptions = (sdl: string) => sdl.replace(/"""[^"]*"""\nscalar/g, "scalar").replace(/"[^"\n]*"\nscalar/g, "scalar");
    const served = withoutScalarDescriptions(printSchema(buildClientSchema(introspection)));
    const file = withoutScalarDescriptions(printSchema(subgraphOfFile()));
    expect(served).toBe(file);
  });

  it("when a tool that knows nothing of federation reads schema.graphql, then it builds, with the same types as the subgraph", () => {
    const plain = buildSchema(readFileSync("schema.graphql", "utf8"));
    const subgraph = subgraphOfFile();
    for (const name of ["Post", "Comment", "User", "Query", "Mutation", "Subscription"]) {
      expect(printType(plain.getType(name) as GraphQLNamedType), name).toBe(
        printType(subgraph.getType(name) as GraphQLNamedType).replace(/\n {2}_entities\(.*\n {2}_service: _Service!/, ""),
      );
    }
  });

  it("when schema.graphql is read, then every type and field of the contract is there with its signature", () => {
    const schema = subgraphOfFile();
    for (const [typeName, fields] of Object.entries(contract)) {
      const type = schema.getType(typeName);
      expect(type && isObjectType(type), typeName).toBe(true);
      if (!type || !isObjectType(type)) continue;
      expect(Object.keys(type.getFields())).toEqual(expect.arrayContaining(fields));
    }
    const query = schema.getQueryType()?.getFields();
    expect(String(query?.posts?.type)).toBe("[Post]!");
    expect(query?.feed?.args.map((a) => `${a.name}: ${String(a.type)} = ${JSON.stringify(a.defaultValue ?? null)}`)).toEqual([
      "first: Int = 20",
      "after: String = null",
    ]);
    const mutation = schema.getMutationType()?.getFields();
    expect(String(mutation?.likePost?.type)).toBe("PostLikePayload!");
    expect(mutation?.createComment?.args.map((a) => `${a.name}: ${String(a.type)}`)).toEqual(["postId: ID!", "body: String!", "parentId: ID"]);
    const signature = (field: { type: unknown; args: readonly { name: string; type: unknown }[] } | undefined) =>
      `(${field?.args.map((a) => `${a.name}: ${String(a.type)}`).join(", ")}): ${String(field?.type)}`;
    expect(signature(mutation?.recordViews)).toBe("(postIds: [ID!]!): Int!");
    expect(signature(mutation?.collectPost)).toBe("(postId: ID!): PostCollectPayload!");
    expect(signature(mutation?.uncollectPost)).toBe("(postId: ID!): PostCollectPayload!");
    expect(signature(mutation?.followUser)).toBe("(userId: ID!): FollowPayload!");
    expect(signature(mutation?.unfollowUser)).toBe("(userId: ID!): FollowPayload!");
    const user = schema.getType("User");
    if (!user || !isObjectType(user)) throw new Error("no User type");
    for (const [name, type] of [
      ["followers", "UserConnection!"],
      ["following", "UserConnection!"],
      ["likedPosts", "PostConnection!"],
      ["collectedPosts", "PostConnection!"],
    ]) {
      const field = user.getFields()[name as string];
      expect(`${String(field?.type)} ${field?.args.map((a) => `${a.name}: ${String(a.type)} = ${JSON.stringify(a.defaultValue ?? null)}`).join(", ")}`).toBe(
        `${type} first: Int = 20, after: String = null`,
      );
    }
    expect(String(user.getFields().viewerFollows?.type)).toBe("Boolean!");
  });
});
