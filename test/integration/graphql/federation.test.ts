// A supergraph of two subgraphs: this service (counts, the viewer's memberships,
// mutations) and a small content subgraph of another team's (articles, their
// titles and summaries), composed by @apollo/composition and served by
// @apollo/gateway, which forwards the viewer's token to this service.
import { composeServices } from "@apollo/composition";
import { ApolloGateway, RemoteGraphQLDataSource } from "@apollo/gateway";
import { ApolloServer } from "@apollo/server";
import { startStandaloneServer } from "@apollo/server/standalone";
import { buildSubgraphSchema } from "@apollo/subgraph";
import { GraphQLError, parse, type GraphQLFormattedError } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../../src/stores/postgres/database.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { startCustomApi } from "../../support/custom-api.js";
import { codesOf, createUsers, dataOf, graphqlClient, openDatabase, type TestUser } from "../../support/env.js";

/** The content subgraph: it owns articles, which are posts of this service by id, and shares their titles. */
const contentTypeDefs = parse(`
  extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key", "@shareable"])
  type Query { articles: [Post!]! }
  type Post @key(fields: "id") {
    id: ID!
    title: String! @shareable
    summary: String!
  }
`);

interface Article {
  readonly id: string;
  readonly title: string;
  readonly summary: string;
}

let api: TestApi;
let db: Database;
let author: TestUser;
let viewer: TestUser;
let articles: Article[];
let content: ApolloServer;
let supergraph: ApolloServer;
let gateway: ReturnType<typeof graphqlClient>;
/** The operations the gateway sent, per subgraph. */
const sent: { subgraph: string; query: string; authorization: string | null }[] = [];

async function startContentSubgraph(): Promise<string> {
  const byId = new Map(articles.map((a) => [a.id, a]));
  content = new ApolloServer({
    schema: buildSubgraphSchema({
      typeDefs: contentTypeDefs,
      resolvers: {
        Query: { articles: () => articles },
        Post: { __resolveReference: (reference: { id: string }) => byId.get(reference.id) ?? null },
      },
    }),
  });
  return (await startStandaloneServer(content, { listen: { host: "127.0.0.1", port: 0 } })).url;
}

/**
 * The data source docs/federation.md sets up: the service answers refusals with an HTTP
 * error status (401, 429, 400) and a GraphQL body, which @apollo/gateway would turn into
 * "401: Unauthorized"; this passes the service's message and code on instead.
 */
class CountsSubgraph extends RemoteGraphQLDataSource<{ authorization?: string }> {
  override async errorFromResponse(response: Parameters<RemoteGraphQLDataSource["errorFromResponse"]>[0]): Promise<GraphQLError> {
    const body = await this.parseBody(response.clone());
    const errors = typeof body === "object" && "errors" in body && Array.isArray(body.errors) ? (body.errors as GraphQLFormattedError[]) : [];
    const first = errors[0];
    if (!first) return super.errorFromResponse(response);
    return new GraphQLError(first.message, { extensions: { ...first.extensions, response: { status: response.status } } });
  }
}

async function startSupergraph(subgraphs: { name: string; url: string }[], sdlOf: (name: string) => Promise<string>): Promise<string> {
  const composed = composeServices(await Promise.all(subgraphs.map(async ({ name, url }) => ({ name, url, typeDefs: parse(await sdlOf(name)) }))));
  if (composed.errors) throw new Error(`composition failed: ${composed.errors.map((e) => e.message).join("; ")}`);
  const federation = new ApolloGateway({
    supergraphSdl: composed.supergraphSdl,
    buildService: ({ name, url }) =>
      new CountsSubgraph({
        url,
        willSendRequest(options) {
          // Only operations a client sent carry a client's context; health checks and schema loads have none.
          const authorization = "incomingRequestContext" in options ? (options.context.authorization ?? null) : null;
          if (authorization) options.request.http?.headers.set("authorization", authorization);
          sent.push({ subgraph: name, query: options.request.query ?? "", authorization });
        },
      }),
  });
  supergraph = new ApolloServer({ gateway: federation });
  const { url } = await startStandaloneServer(supergraph, {
    listen: { host: "127.0.0.1", port: 0 },
    context: async ({ req }) => ({ ...(req.headers.authorization && { authorization: req.headers.authorization }) }),
  });
  return url;
}

beforeAll(async () => {
  api = await startTestApi();
  db = openDatabase(api.config);
  [author, viewer] = (await createUsers(db, api.config, 2)) as [TestUser, TestUser];
  articles = [];
  for (let i = 0; i < 3; i++) {
    const created = await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "Post ${i}", body: "b") { id } }`, {}, author.token);
    const id = dataOf(created).createPost.id;
    articles.push({ id, title: `Post ${i}`, summary: `What post ${i} is about` });
  }
  const contentUrl = await startContentSubgraph();
  const countsUrl = `${api.url}graphql`;
  // Each subgraph's SDL as a router's build step reads it: from the running service's `_service`.
  const sdlOf = async (name: string) => {
    const url = name === "counts" ? api.url : contentUrl;
    return dataOf(await graphqlClient(url)<{ _service: { sdl: string } }>(`{ _service { sdl } }`))._service.sdl;
  };
  gateway = graphqlClient(
    await startSupergraph(
      [
        { name: "counts", url: countsUrl },
        { name: "content", url: contentUrl },
      ],
      sdlOf,
    ),
  );
});

afterAll(async () => {
  await supergraph?.stop();
  await content?.stop();
  await api.close();
  await db.$disconnect();
});

const withCounts = `{ articles { id title summary counts { likes } viewerHasLiked } }`;
type Articles = { articles: { id: string; title: string; summary: string; counts: { likes: number }; viewerHasLiked: boolean }[] };

describe("as a subgraph of a supergraph", () => {
  it("when the gateway is asked for articles with their counts, then titles come from the content subgraph and counts from this one, in one _entities call", async () => {
    sent.length = 0;
    const read = dataOf(await gateway<Articles>(withCounts));
    expect(read.articles).toEqual(articles.map((a) => ({ ...a, counts: { likes: 0 }, viewerHasLiked: false })));
    const bySubgraph = (name: string) => sent.filter((s) => s.subgraph === name).map((s) => s.query);
    expect(bySubgraph("content")).toHaveLength(1);
    expect(bySubgraph("content")[0]).toMatch(/articles\s*\{[^}]*title/);
    const countsQueries = bySubgraph("counts");
    expect(countsQueries).toHaveLength(1);
    expect(countsQueries[0]).toMatch(/_entities\(representations:/);
    expect(countsQueries[0]).toMatch(/counts/);
    expect(countsQueries[0]).not.toMatch(/title/);
  });

  it("when a viewer likes through the gateway with their token, then this subgraph sees the viewer and the articles show the like", async () => {
    const target = articles[1] as Article;
    sent.length = 0;
    const liked = await gateway<{ likePost: { changed: boolean; post: { summary: string; counts: { likes: number }; viewerHasLiked: boolean } } }>(
      `mutation($id: ID!) { likePost(postId: $id) { changed post { summary counts { likes } viewerHasLiked } } }`,
      { id: target.id },
      viewer.token,
    );
    // The mutation runs here; the post's summary, which only the content subgraph has, is joined in by id.
    expect(dataOf(liked).likePost).toEqual({ changed: true, post: { summary: target.summary, counts: { likes: 1 }, viewerHasLiked: true } });
    expect(sent.find((s) => s.subgraph === "counts")?.authorization).toBe(`Bearer ${viewer.token}`);

    const asViewer = dataOf(await gateway<Articles>(withCounts, {}, viewer.token)).articles;
    expect(asViewer.map((a) => [a.counts.likes, a.viewerHasLiked])).toEqual([
      [0, false],
      [1, true],
      [0, false],
    ]);
    const anonymous = dataOf(await gateway<Articles>(withCounts)).articles;
    expect(anonymous.map((a) => [a.counts.likes, a.viewerHasLiked])).toEqual([
      [0, false],
      [1, false],
      [0, false],
    ]);
  });

  it("when a mutation comes through the gateway without a token, then this subgraph's UNAUTHENTICATED reaches the client", async () => {
    const refused = await gateway(`mutation($id: ID!) { likePost(postId: $id) { changed } }`, { id: (articles[0] as Article).id });
    expect(codesOf(refused)).toEqual(["UNAUTHENTICATED"]);
  });

  it("when a mutation comes through the gateway with a bad token, then the client gets this subgraph's message and code, not the HTTP status line", async () => {
    const refused = await gateway(`mutation($id: ID!) { likePost(postId: $id) { changed } }`, { id: (articles[0] as Article).id }, "not-a-token");
    expect(codesOf(refused)).toEqual(["UNAUTHENTICATED"]);
    const direct = await api.gql(`mutation($id: ID!) { likePost(postId: $id) { changed } }`, { id: (articles[0] as Article).id }, "not-a-token");
    expect(refused.errors?.[0]?.message).toBe(direct.errors?.[0]?.message);
    expect(refused.errors?.[0]?.message).not.toMatch(/^401/);
  });
});

describe("_entities called directly", () => {
  it("when representations name unknown ids, then those entities are null and the others resolve", async () => {
    const read = await api.gql<{ _entities: ({ id: string; title: string } | null)[] }>(
      `query($r: [_Any!]!) { _entities(representations: $r) { ... on Post { id title } ... on User { id username } } }`,
      {
        r: [
          { __typename: "Post", id: (articles[0] as Article).id },
          { __typename: "Post", id: "999999999" },
          { __typename: "User", id: viewer.id.toString() },
        ],
      },
    );
    expect(dataOf(read)._entities).toEqual([
      { id: (articles[0] as Article).id, title: "Post 0" },
      null,
      { id: viewer.id.toString(), username: viewer.username },
    ]);
  });

  it("when one call asks for posts and comments with different counts, then every run answers each type's own fields", async () => {
    const post = (articles[2] as Article).id;
    const created = await api.gql<{ createComment: { id: string } }>(
      `mutation($p: ID!) { createComment(postId: $p, body: "c") { id } }`,
      { p: post },
      viewer.token,
    );
    const comment = dataOf(created).createComment.id;
    const query = `query($r: [_Any!]!) { _entities(representations: $r) {
      ... on Post { id counts { likes collects comments } }
      ... on Comment { id counts { likes replies } }
      ... on User { id counts { followers } } } }`;
    const r = [
      { __typename: "Post", id: post },
      { __typename: "Comment", id: comment },
      { __typename: "User", id: viewer.id.toString() },
    ];
    const expected = [
      { id: post, counts: { likes: 0, collects: 0, comments: 1 } },
      { id: comment, counts: { likes: 0, replies: 0 } },
      { id: viewer.id.toString(), counts: { followers: 0 } },
    ];
    // The third run onwards is written by the serializer compiled from the operation's shape.
    for (let run = 0; run < 4; run++) expect(dataOf(await api.gql<{ _entities: unknown[] }>(query, { r }))._entities, `run ${run}`).toEqual(expected);
  });

  it("when representations are more than posts(ids:) takes, or name no entity type, then the answer is BAD_USER_INPUT", async () => {
    const query = `query($r: [_Any!]!) { _entities(representations: $r) { ... on Post { id } } }`;
    const tooMany = Array.from({ length: 101 }, (_, i) => ({ __typename: "Post", id: String(i + 1) }));
    expect(codesOf(await api.gql(query, { r: tooMany }))).toEqual(["BAD_USER_INPUT"]);
    expect(codesOf(await api.gql(query, { r: [{ __typename: "PostCounts", id: "1" }] }))).toEqual(["BAD_USER_INPUT"]);
    expect(codesOf(await api.gql(query, { r: [{ __typename: "Post", id: "abc" }] }))).toEqual(["BAD_USER_INPUT"]);
    expect(codesOf(await api.gql(query, { r: ["Post:1"] }))).toEqual(["BAD_USER_INPUT"]);
  });

  it("when introspection is off, as in production, then _service still tells the subgraph's schema for a router to compose", async () => {
    const production = await startCustomApi({ introspection: false });
    try {
      expect(codesOf(await production.gql(`{ __schema { types { name } } }`))).toEqual(["GRAPHQL_VALIDATION_FAILED"]);
      const { sdl } = dataOf(await production.gql<{ _service: { sdl: string } }>(`{ _service { sdl } }`))._service;
      expect(sdl).toMatch(/type Post\s+@key\(fields: "id"\)/);
      expect(sdl).toContain("viewerHasLiked: Boolean!");
    } finally {
      await production.close();
    }
  });
});
