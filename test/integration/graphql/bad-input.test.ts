// Bad input of every kind answers a GraphQL error with a code, never
// INTERNAL_SERVER_ERROR, an HTML page or a stack trace.
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCustomApi, type CustomApi } from "../../support/custom-api.js";
import { codesOf, createUsers, dataOf, openDatabase, type GraphQLResponse, type TestUser } from "../../support/env.js";

let api: CustomApi;
let user: TestUser;
let postId: string;
let commentId: string;

async function send(init: RequestInit, path = "graphql") {
  const response = await fetch(new URL(path, api.url), init);
  const text = await response.text();
  return { status: response.status, type: response.headers.get("content-type") ?? "", text, body: JSON.parse(text) as GraphQLResponse<unknown> };
}
const postJson = (body: unknown) => send({ method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

beforeAll(async () => {
  api = await startCustomApi();
  const db = openDatabase(api.config);
  [user] = (await createUsers(db, api.config, 1)) as [TestUser];
  await db.$disconnect();
  postId = dataOf(await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "t", body: "b") { id } }`, {}, user.token)).createPost.id;
  commentId = dataOf(
    await api.gql<{ createComment: { id: string } }>(`mutation($p: ID!) { createComment(postId: $p, body: "c") { id } }`, { p: postId }, user.token),
  ).createComment.id;
});
afterAll(async () => {
  await api.close();
});

const withNul = "a\u0000b";

describe("control characters", () => {
  it.each([
    ["title", `mutation($v: String!) { createPost(title: $v, body: "b") { id } }`],
    ["body", `mutation($v: String!) { createPost(title: "t", body: $v) { id } }`],
    ["body", `mutation($v: String!, $p: ID!) { createComment(postId: $p, body: $v) { id } }`],
  ])("when a %s holds a NUL byte, then it is BAD_USER_INPUT naming it", async (field, query) => {
    const answer = await api.gql(query, { v: withNul, p: postId }, user.token);
    expect(answer.errors?.[0]?.extensions).toEqual({ code: "BAD_USER_INPUT", field });
  });

  it.each([
    ["username", { u: withNul, e: "a@b.io", p: "secret123" }],
    ["email", { u: "fine_name", e: `a${withNul}@b.io`, p: "secret123" }],
    ["password", { u: "fine_name", e: "a@b.io", p: `secret123${withNul}` }],
    ["email", { u: "fine_name", e: "a\u001b@b.io", p: "secret123" }],
  ])("when registration's %s holds a control character, then it is BAD_USER_INPUT naming it", async (field, variables) => {
    const answer = await api.gql(`mutation($u: String!, $e: String!, $p: String!) { register(username: $u, email: $e, password: $p) { token } }`, variables);
    expect(answer.errors?.[0]?.extensions).toEqual({ code: "BAD_USER_INPUT", field });
  });

  it.each([["postId"], ["commentId"]])("when an id (%s) holds a NUL byte, then it is BAD_USER_INPUT", async (field) => {
    const mutation = field === "postId" ? "likePost(postId: $v)" : "likeComment(commentId: $v)";
    const answer = await api.gql(`mutation($v: ID!) { ${mutation} { changed } }`, { v: `1${withNul}` }, user.token);
    expect(answer.errors?.[0]?.extensions).toEqual({ code: "BAD_USER_INPUT", field });
  });

  it("when a title holds a line break or a lone surrogate, then it is BAD_USER_INPUT", async () => {
    for (const title of ["two\nlines", "half \ud800 pair", "del\u007f"]) {
      const answer = await api.gql(`mutation($v: String!) { createPost(title: $v, body: "b") { id } }`, { v: title }, user.token);
      expect(codesOf(answer), JSON.stringify(title)).toEqual(["BAD_USER_INPUT"]);
    }
  });

  it("when a body holds tabs, line breaks and emoji, then it is kept as sent", async () => {
    const body = "first line\r\n\tindented 👍\nlast";
    const created = dataOf(
      await api.gql<{ createPost: { body: string } }>(`mutation($v: String!) { createPost(title: "t", body: $v) { body } }`, { v: body }, user.token),
    );
    expect(created.createPost.body).toBe(body);
  });
});

describe("cursors and ids", () => {
  const beyondBigint = Buffer.from(`c:${2n ** 63n}`).toString("base64url");
  it.each([
    ["feed", `query($a: String) { feed(after: $a) { edges { cursor } } }`],
    ["comments", `query($a: String, $p: ID!) { post(id: $p) { comments(after: $a) { edges { cursor } } } }`],
    ["replies", `query($a: String, $c: ID!) { comment(id: $c) { replies(after: $a) { edges { cursor } } } }`],
    ["likers", `query($a: String, $p: ID!) { post(id: $p) { likers(after: $a) { edges { cursor } } } }`],
  ])("when %s gets a cursor holding an id above 2^63-1, then it is BAD_USER_INPUT on after", async (_, query) => {
    const answer = await api.gql(query, { a: beyondBigint, p: postId, c: commentId });
    expect(answer.errors?.[0]?.extensions).toEqual({ code: "BAD_USER_INPUT", field: "after" });
  });

  it.each([[101], [2_147_483_647]])("when a page asks for first: %s, then it is BAD_USER_INPUT on first, not a cost refusal", async (first) => {
    const answer = await api.gql(`query($n: Int!) { feed(first: $n) { edges { node { id counts { likes } } } } }`, { n: first });
    expect(answer.errors?.[0]?.extensions).toEqual({ code: "BAD_USER_INPUT", field: "first" });
  });

  it("when likers gets a cursor of a time after the year 9999, then it is BAD_USER_INPUT on after", async () => {
    const query = `query($a: String, $p: ID!) { post(id: $p) { likers(after: $a) { edges { cursor } } } }`;
    const answer = await api.gql(query, { a: Buffer.from("l:253402300800000:1").toString("base64url"), p: postId });
    expect(answer.errors?.[0]?.extensions).toEqual({ code: "BAD_USER_INPUT", field: "after" });
  });
});

describe("persisted queries", () => {
  const query = "{ __typename }";
  const sha = createHash("sha256").update(query).digest("hex");

  it("when the hash does not match the query, then it is PERSISTED_QUERY_HASH_MISMATCH", async () => {
    const answer = await postJson({ query, extensions: { persistedQuery: { version: 1, sha256Hash: "0".repeat(64) } } });
    expect(answer.status).toBe(400);
    expect(codesOf(answer.body)).toEqual(["PERSISTED_QUERY_HASH_MISMATCH"]);
  });

  it("when the version is not 1, then it is PERSISTED_QUERY_VERSION_UNSUPPORTED", async () => {
    const answer = await postJson({ query, extensions: { persistedQuery: { version: 2, sha256Hash: sha } } });
    expect(codesOf(answer.body)).toEqual(["PERSISTED_QUERY_VERSION_UNSUPPORTED"]);
  });

  it("when a hash is unknown, then it is PERSISTED_QUERY_NOT_FOUND, and once registered it is served", async () => {
    const fresh = `{ __typename viewer { id } }`;
    const hash = createHash("sha256").update(fresh).digest("hex");
    expect(codesOf((await postJson({ extensions: { persistedQuery: { version: 1, sha256Hash: hash } } })).body)).toEqual(["PERSISTED_QUERY_NOT_FOUND"]);
    expect((await postJson({ query: fresh, extensions: { persistedQuery: { version: 1, sha256Hash: hash } } })).body.errors).toBeUndefined();
    expect((await postJson({ extensions: { persistedQuery: { version: 1, sha256Hash: hash } } })).body.data).toEqual({ __typename: "Query", viewer: null });
  });
});

describe("HTTP", () => {
  it("when the body is not JSON, then it is BAD_REQUEST (HTTP 400) as JSON", async () => {
    const answer = await send({ method: "POST", headers: { "content-type": "application/json" }, body: `{"query": "{ __typename }"` });
    expect(answer.status).toBe(400);
    expect(answer.type).toMatch(/^application\/json/);
    expect(codesOf(answer.body)).toEqual(["BAD_REQUEST"]);
    expect(answer.text).not.toMatch(/ at |<html/i);
  });

  it("when the body is 60 MB, then it is PAYLOAD_TOO_LARGE (HTTP 413) as JSON", async () => {
    const answer = await send({
      method: "POST",
      headers: { "content-type": "application/json" },
      body: `{"query": "${" ".repeat(60 * 1024 * 1024)}{ __typename }"}`,
    });
    expect(answer.status).toBe(413);
    expect(codesOf(answer.body)).toEqual(["PAYLOAD_TOO_LARGE"]);
  });

  it("when the body is of another media type, then it is BAD_REQUEST as JSON", async () => {
    const answer = await send({ method: "POST", headers: { "content-type": "application/xml" }, body: "<query/>" });
    expect(answer.status).toBe(415);
    expect(codesOf(answer.body)).toEqual(["BAD_REQUEST"]);
  });

  it("when a path other than /graphql is asked, then it is ROUTE_NOT_FOUND (HTTP 404) as JSON", async () => {
    for (const [method, path] of [
      ["GET", "health"],
      ["POST", ""],
      ["GET", "graphql/x"],
      ["PUT", "graphqlx"],
    ] as const) {
      const answer = await send({ method, headers: { "content-type": "application/json" }, ...(method === "GET" ? {} : { body: "{}" }) }, path);
      expect(answer.status, `${method} /${path}`).toBe(404);
      expect(codesOf(answer.body)).toEqual(["ROUTE_NOT_FOUND"]);
    }
  });

  it("when /graphql is sent a method it does not take, then it is METHOD_NOT_ALLOWED (HTTP 405) with Allow", async () => {
    for (const method of ["PUT", "DELETE", "PATCH"]) {
      const response = await fetch(new URL("graphql?query=%7B__typename%7D", api.url), { method, headers: { "content-type": "application/json" }, body: "{}" });
      expect(response.status, method).toBe(405);
      expect(response.headers.get("allow")).toBe("GET, POST, OPTIONS");
      expect(codesOf((await response.json()) as GraphQLResponse<unknown>)).toEqual(["METHOD_NOT_ALLOWED"]);
    }
  });

  it("when a subscription is sent over HTTP, then it is refused with a code", async () => {
    const answer = await postJson({ query: 'subscription { postCounts(postIds: ["1"]) { id } }' });
    expect(answer.status).toBe(400);
    // Validation passes a subscription the schema has no root type for; the executor refuses
    // it, as it refuses one the schema does serve (test/unit/graphql/jit-executor.test.ts).
    expect(codesOf(answer.body)).toEqual(["OPERATION_NOT_SUPPORTED"]);
  });
});

describe("suggestions", () => {
  let closed: CustomApi;
  beforeAll(async () => {
    closed = await startCustomApi({ introspection: false });
  });
  afterAll(async () => {
    await closed.close();
  });

  it("when introspection is off and a field is misspelt, then the error does not suggest the schema's names", async () => {
    const answer = await closed.gql(`{ fed { edges { cursor } } }`);
    expect(codesOf(answer)).toEqual(["GRAPHQL_VALIDATION_FAILED"]);
    expect(answer.errors?.[0]?.message).not.toMatch(/Did you mean/);
    // The same mistake against a server with introspection on does suggest: the test can fail.
    expect((await api.gql(`{ fed { edges { cursor } } }`)).errors?.[0]?.message).toMatch(/Did you mean "feed"/);
  });
});
