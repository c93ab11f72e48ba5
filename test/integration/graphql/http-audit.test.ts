// The GraphQL-over-HTTP compliance audit of graphql-http, run against the real
// server, and what the transport takes from clients with their defaults.
import { auditServer } from "graphql-http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../../src/stores/postgres/database.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { createUsers, dataOf, openDatabase, type TestUser } from "../../support/env.js";

let api: TestApi;
let db: Database;
let user: TestUser;
beforeAll(async () => {
  api = await startTestApi();
  db = openDatabase(api.config);
  user = (await createUsers(db, api.config, 1))[0] as TestUser;
});
afterAll(async () => {
  await api.close();
  await db.$disconnect();
});

/**
 * Recommendations (SHOULD) the server does not follow, each on purpose. All three
 * ask for HTTP 200, instead of Apollo Server's 400, when a request that accepts
 * only `application/json` fails to parse, validate or coerce its variables. Kept:
 * one status for a bad request whatever media type the client accepts; a 200 to a
 * GET may be stored by HTTP caches and proxies while a 400 is not; and the clients
 * this service is used with (Apollo Client, urql, graphql-request) read the errors
 * from a 400's body.
 */
const acceptedWarnings = [
  "SHOULD use 200 status code on document parsing failure when accepting application/json",
  "SHOULD use 200 status code on document validation failure when accepting application/json",
  "SHOULD use a status code of 200 on variable coercion failure when accepting application/json",
];

describe("GraphQL over HTTP audit", () => {
  it("when graphql-http audits the server, then no requirement fails and only the accepted recommendations are not followed", async () => {
    const results = await auditServer({ url: `${api.url}graphql` });
    const named = (status: string) => results.filter((r) => r.status === status).map((r) => r.name);
    expect(named("error")).toEqual([]);
    expect(named("warn").sort()).toEqual([...acceptedWarnings].sort());
    expect(named("ok").length).toBeGreaterThanOrEqual(55);
  });
});

describe("requests as clients send them by default", () => {
  const likes = async (postId: bigint) =>
    dataOf(await api.gql<{ post: { counts: { likes: number } } }>(`query($id: ID!) { post(id: $id) { counts { likes } } }`, { id: postId.toString() })).post
      .counts.likes;

  it("when a query comes as a GET with no header but the URL (urql's default), then it is answered", async () => {
    const response = await fetch(`${api.url}graphql?query=${encodeURIComponent("{ __typename }")}`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ data: { __typename: "Query" } });
  });

  it("when a mutation comes as a GET, even with a valid token, then it answers 405 and changes nothing", async () => {
    const post = await api.services.content.createPost(user.id, "get", "b");
    const query = encodeURIComponent(`mutation { likePost(postId: "${post.id}") { changed } }`);
    const response = await fetch(`${api.url}graphql?query=${query}`, { headers: { authorization: `Bearer ${user.token}` } });
    expect(response.status).toBe(405);
    expect(await likes(post.id)).toBe(0);
  });

  it("when a POST comes as a media type a page may send cross-site without a preflight, then it is refused as BAD_REQUEST before it runs", async () => {
    const post = await api.services.content.createPost(user.id, "simple", "b");
    const body = JSON.stringify({ query: `mutation { likePost(postId: "${post.id}") { changed } }` });
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const response = await fetch(`${api.url}graphql`, { method: "POST", headers: { "content-type": type, authorization: `Bearer ${user.token}` }, body });
      expect(response.status).toBe(415);
      expect(((await response.json()) as { errors: { extensions: { code: string } }[] }).errors[0]?.extensions.code).toBe("BAD_REQUEST");
    }
    // A body with no Content-Type at all (fetch sends none for bytes) is refused alike.
    const untyped = await fetch(`${api.url}graphql`, {
      method: "POST",
      headers: { authorization: `Bearer ${user.token}` },
      body: new TextEncoder().encode(body),
    });
    expect(untyped.status).toBe(415);
    expect(await likes(post.id)).toBe(0);
  });
});
