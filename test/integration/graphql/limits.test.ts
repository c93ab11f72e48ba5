// Request limits: what one request may ask for is refused before any resolver,
// loader or SQL query runs, with a code and the measured figure in extensions.
import { GraphQLError } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Context } from "../../../src/graphql/context.js";
import { startCustomApi, type CustomApi } from "../../support/custom-api.js";
import { createUsers, dataOf, openDatabase, type GraphQLResponse, type TestUser } from "../../support/env.js";

const nestedComments = `{ feed(first:100){edges{node{comments(first:100){edges{node{post{comments(first:100){edges{node{id}}}}}}}}}} }`;
const aliasedLikes = (count: number) => `mutation {${Array.from({ length: count }, (_, i) => ` l${i}: likePost(postId: "1") { changed }`).join("")} }`;

let api: CustomApi;
let user: TestUser;
const charged: { viewer: bigint | null; cost: number }[] = [];

async function post(body: string, token?: string) {
  const response = await fetch(api.endpoint, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body,
  });
  return { status: response.status, body: (await response.json()) as GraphQLResponse<unknown> };
}

/** What a request caused: SQL statements and use-case calls other than reading the bearer token. */
async function effectsOf<T>(send: () => Promise<T>): Promise<{ result: T; sql: number; calls: string[] }> {
  const sqlBefore = api.sqlQueries();
  const callsBefore = api.serviceCalls().length;
  const result = await send();
  const calls = api
    .serviceCalls()
    .slice(callsBefore)
    .filter((c) => c !== "users.authenticate");
  return { result, sql: api.sqlQueries() - sqlBefore, calls };
}

beforeAll(async () => {
  api = await startCustomApi({
    onCost: async (context: Context, cost: number) => {
      charged.push({ viewer: context.viewer?.userId ?? null, cost });
      if (cost === 77)
        throw new GraphQLError("Too many expensive queries; retry in 3 seconds.", { extensions: { code: "RATE_LIMITED", retryAfterSeconds: 3 } });
    },
  });
  const db = openDatabase(api.config);
  [user] = (await createUsers(db, api.config, 1)) as [TestUser];
  await db.$disconnect();
  // The token's user is looked up once; later requests find it cached and send no SQL for it.
  dataOf(await api.gql(`{ viewer { id } }`, {}, user.token));
});
afterAll(async () => {
  await api.close();
});

describe("request limits", () => {
  it("when the nested comments query arrives, then it is QUERY_TOO_COSTLY with its cost, and no resolver or SQL runs", async () => {
    const { result, sql, calls } = await effectsOf(() => post(JSON.stringify({ query: nestedComments })));
    expect(result.status).toBe(400);
    expect(result.body.errors).toHaveLength(1);
    expect(result.body.errors?.[0]?.extensions).toEqual({ code: "QUERY_TOO_COSTLY", cost: 3_040_300, limit: 5_000 });
    expect(result.body).not.toHaveProperty("data");
    expect(sql).toBe(0);
    expect(calls).toEqual([]);
  });

  it("when 450 aliased likePost mutations arrive in one document, then they are TOO_MANY_ALIASES and nothing is liked", async () => {
    const { result, sql, calls } = await effectsOf(() => post(JSON.stringify({ query: aliasedLikes(450) }), user.token));
    expect(result.status).toBe(400);
    expect(result.body.errors?.[0]?.extensions).toEqual({ code: "TOO_MANY_ALIASES", aliases: 450, limit: 30 });
    expect(sql).toBe(0);
    expect(calls).toEqual([]);
  });

  it("when fields nest deeper than MAX_QUERY_DEPTH, then the operation is QUERY_TOO_DEEP with its depth", async () => {
    const deep = `{ comment(id: "1") { ${"parent { ".repeat(12)}id${" }".repeat(12)} } }`;
    const { result, sql, calls } = await effectsOf(() => post(JSON.stringify({ query: deep })));
    expect(result.body.errors?.[0]?.extensions).toEqual({ code: "QUERY_TOO_DEEP", depth: 14, limit: 12 });
    expect(sql).toBe(0);
    expect(calls).toEqual([]);
  });

  it("when a fragment hides the depth, then it is counted all the same", async () => {
    const query = `query { comment(id: "1") { ...Up } } fragment Up on Comment { ${"parent { ".repeat(12)}id${" }".repeat(12)} }`;
    const { result } = await effectsOf(() => post(JSON.stringify({ query })));
    expect(result.body.errors?.[0]?.extensions).toMatchObject({ code: "QUERY_TOO_DEEP", depth: 14 });
  });

  it("when variables hold more values than MAX_VARIABLE_VALUES, then they are VARIABLES_TOO_LARGE before any coercion", async () => {
    const ids = Array.from({ length: 5_000 }, (_, i) => String(i + 1));
    const { result, sql, calls } = await effectsOf(() =>
      post(JSON.stringify({ query: `query($ids: [ID!]!) { posts(ids: $ids) { id } }`, variables: { ids } })),
    );
    expect(result.status).toBe(400);
    expect(result.body.errors?.[0]?.extensions).toEqual({ code: "VARIABLES_TOO_LARGE", values: 1_001, limit: 1_000 });
    expect(sql).toBe(0);
    expect(calls).toEqual([]);
  });

  it("when a body of a million ids arrives, then it is PAYLOAD_TOO_LARGE (HTTP 413) as a GraphQL error", async () => {
    const ids = Array.from({ length: 1_000_000 }, (_, i) => String(i + 1));
    const { result, sql } = await effectsOf(() => post(JSON.stringify({ query: `query($ids: [ID!]!) { posts(ids: $ids) { id } }`, variables: { ids } })));
    expect(result.status).toBe(413);
    expect(result.body.errors?.[0]?.extensions).toEqual({ code: "PAYLOAD_TOO_LARGE", limit: 102_400 });
    expect(sql).toBe(0);
  });

  it("when a list argument is long, then the cost multiplies by its length", async () => {
    const ids = Array.from({ length: 100 }, (_, i) => `"${i + 1}"`).join(",");
    const { result } = await effectsOf(() =>
      post(JSON.stringify({ query: `{ posts(ids: [${ids}]) { author { counts { posts } } comments(first: 20) { edges { node { id } } } } }` })),
    );
    // 100 × (1 + author 2 + comments 20 × (1 + 1 + 1)) = 6,300.
    expect(result.body.errors?.[0]?.extensions).toEqual({ code: "QUERY_TOO_COSTLY", cost: 6_300, limit: 5_000 });
  });

  it("when a query is within every limit, then it runs and the cost hook is charged its cost with the viewer", async () => {
    charged.length = 0;
    const ids = Array.from({ length: 100 }, (_, i) => String(i + 1));
    const answer = await api.gql(
      `query($ids: [ID!]!) { posts(ids: $ids) { id title counts { likes reads comments collects } viewerHasLiked author { id } } }`,
      { ids },
      user.token,
    );
    expect(answer.errors).toBeUndefined();
    expect(charged).toEqual([{ viewer: user.id, cost: 300 }]);
  });

  it("when the cost hook throws, then its error is the response and nothing executes", async () => {
    // 11 × (1 + edges (1 + node 4) + pageInfo 1) = 77: the cost the hook refuses.
    const query = `{ feed(first: 11) { edges { node { author { counts { posts } } counts { likes } } } pageInfo { hasNextPage } } }`;
    const { result, sql, calls } = await effectsOf(() => post(JSON.stringify({ query })));
    expect(result.body.errors?.[0]).toMatchObject({
      message: "Too many expensive queries; retry in 3 seconds.",
      extensions: { code: "RATE_LIMITED", retryAfterSeconds: 3 },
    });
    expect(sql).toBe(0);
    expect(calls).toEqual([]);
  });
});

describe("mutation cap", () => {
  let wide: CustomApi;
  beforeAll(async () => {
    wide = await startCustomApi({ overrides: { MAX_ALIASES: "1000" } });
  });
  afterAll(async () => {
    await wide.close();
  });

  it("when a document holds more root mutations than MAX_MUTATIONS, then it is TOO_MANY_MUTATIONS and none runs", async () => {
    const before = wide.serviceCalls().length;
    const answer = await wide.gql(aliasedLikes(11), {}, user.token);
    expect(answer.errors?.[0]?.extensions).toEqual({ code: "TOO_MANY_MUTATIONS", mutations: 11, limit: 10 });
    expect(
      wide
        .serviceCalls()
        .slice(before)
        .filter((c) => c !== "users.authenticate"),
    ).toEqual([]);
  });
});
