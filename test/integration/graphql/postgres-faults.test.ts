// PostgreSQL faults seen from a client of the API, injected by a TCP proxy between
// the API and PostgreSQL: a server that answers nothing must cost a request its
// statement timeout, not hold it for as long as the stall lasts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readinessShareMs } from "../../../src/compose.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { codesOf, createUsers, dataOf, openDatabase, testConfig, type TestUser } from "../../support/env.js";
import { startTcpProxy, type TcpProxy } from "../../support/tcp-proxy.js";

let proxy: TcpProxy;
let api: TestApi;
let db: Database;
let user: TestUser;
let postId: string;

const likers = `query($id: ID!) { post(id: $id) { likers(first: 5) { edges { node { id } } } } }`;

beforeAll(async () => {
  const databaseUrl = new URL(testConfig().databaseUrl);
  proxy = await startTcpProxy({ host: databaseUrl.hostname, port: Number(databaseUrl.port || 5432) });
  const proxied = new URL(databaseUrl);
  proxied.port = String(proxy.port);
  api = await startTestApi({ DATABASE_URL: proxied.toString(), POSTGRES_STATEMENT_TIMEOUT_MS: "500" });
  db = openDatabase(testConfig());
  user = (await createUsers(db, api.config, 1))[0] as TestUser;
  const created = await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "t", body: "b") { id } }`, {}, user.token);
  postId = dataOf(created).createPost.id;
  dataOf(await api.gql(likers, { id: postId }, user.token));
});
afterAll(async () => {
  proxy.resume();
  await api.close();
  await proxy.close();
  await db.$disconnect();
});

describe("PostgreSQL faults through the API", () => {
  it("when PostgreSQL stalls, then a request that needs it answers SERVICE_UNAVAILABLE while it still stalls, readiness names it, and both recover after", async () => {
    proxy.stall();
    try {
      // The stall lasts until `finally`: only the client's timeout can answer these.
      expect(codesOf(await api.gql(likers, { id: postId }, user.token))).toEqual(["SERVICE_UNAVAILABLE"]);
      const ready = await fetch(`${api.url}health/ready`);
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as { checks: Record<string, string> }).checks.postgres).not.toBe("ok");
    } finally {
      proxy.resume();
    }
    dataOf(await api.gql(likers, { id: postId }, user.token));
    // A report answers every probe for a second; the next one sees PostgreSQL back.
    await new Promise((resolve) => setTimeout(resolve, readinessShareMs));
    expect((await fetch(`${api.url}health/ready`)).status).toBe(200);
  });
});
