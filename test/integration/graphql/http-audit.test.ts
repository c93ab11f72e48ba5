// The GraphQL-over-HTTP compliance audit of graphql-http, run against the real server.
import { auditServer } from "graphql-http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "../../support/api.js";

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
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
    // Notices (MAY) are not counted: the three here are GETs that Apollo's CSRF prevention
    // blocks because they carry no content-type or preflight header, as it should.
    expect(named("error")).toEqual([]);
    expect(named("warn").sort()).toEqual([...acceptedWarnings].sort());
    expect(named("ok").length).toBeGreaterThanOrEqual(55);
  });
});
