// Persisted queries as clients use them: a client that opens a new connection for
// every request (as mobile clients behind NATs and load balancers do) lands on any
// API process, so a hash registered through one must be found by every other, and
// after a restart. Then the bounds of what Redis keeps, a Redis out of reach, the
// safelist and the mode without persisted queries.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createClient } from "graphql-ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { createPersistedQueryStore } from "../../../src/stores/redis/persisted-query-store.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import {
  codesOf,
  createUsers,
  describeOnSingle,
  type GraphQLResponse,
  itOnSingle,
  openDatabase,
  openRedis,
  privateRedisUrl,
  type TestUser,
} from "../../support/env.js";
import { persistedQuery, postOnce, sha256 } from "../../support/persisted-queries.js";
import { startTcpProxy } from "../../support/tcp-proxy.js";

let redis: RedisClient;
beforeAll(async () => {
  redis = await openRedis();
});
afterAll(async () => {
  await redis.quit();
});

describe("automatic persisted queries", () => {
  it("when a client opens a new connection for every request, then a hash registered through one process is found by every other, and after a restart", async () => {
    const apis = [await startTestApi(), await startTestApi()];
    const query = `query HotTen { hotPosts(first: 10, window: ALL) { id counts { likes } } }`;
    try {
      const registered = await persistedQuery((apis[0] as TestApi).url, query);
      expect(registered.hit).toBe(false);
      expect(registered.response.errors).toBeUndefined();
      let hits = 0;
      const requests = 200;
      for (let i = 0; i < requests; i++) {
        // Halfway, the second process restarts: the new one has seen no query.
        if (i === requests / 2) {
          await (apis[1] as TestApi).close();
          apis[1] = await startTestApi();
        }
        const { hit, response } = await persistedQuery((apis[i % 2] as TestApi).url, query);
        expect(response.errors).toBeUndefined();
        if (hit) hits++;
      }
      expect(hits).toBe(requests);
    } finally {
      await Promise.all(apis.map((api) => api.close()));
    }
  });

  it("when more queries are registered than PERSISTED_QUERIES_MAX_ENTRIES, then Redis keeps the most recent ones, each with a TTL", async () => {
    const keys = createRedisKeys(4);
    await redis.del(keys.persistedQueryIndex());
    const store = createPersistedQueryStore(redis, keys, { ttlSeconds: 600, maxEntries: 3 });
    const texts = Array.from({ length: 5 }, (_, i) => `{ hotPosts(first: ${i + 1}, window: ALL) { id } }`);
    for (const text of texts) await store.set(sha256(text), text);
    const kept = await redis.zrange(keys.persistedQueryIndex(), "0", "-1");
    expect(kept.sort()).toEqual(
      texts
        .slice(2)
        .map((text) => sha256(text))
        .sort(),
    );
    for (const text of texts.slice(0, 2)) expect(await redis.exists(keys.persistedQuery(sha256(text)))).toBe(0);
    for (const text of texts.slice(2)) {
      const ttl = await redis.ttl(keys.persistedQuery(sha256(text)));
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(600);
    }
    // A text past the size bound is not kept; a hash that is not a SHA-256 is never looked up.
    const long = `{ ${"__typename ".repeat(2_000)}}`;
    await store.set(sha256(long), long);
    expect(await redis.exists(keys.persistedQuery(sha256(long)))).toBe(0);
    expect(await store.get("}{pq")).toBeUndefined();
    // Another process's store finds what this one kept.
    const other = createPersistedQueryStore(redis, keys, { ttlSeconds: 600, maxEntries: 3 });
    expect(await other.get(sha256(texts[4] as string))).toBe(texts[4]);
  });

  itOnSingle("when Redis stalls, then a lookup answers unknown within its timeout and the query runs from its text", async () => {
    const url = new URL(privateRedisUrl());
    const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
    // The private Redis through a proxy, in either project; commands wait far longer than the request's
    // deadline, so only the lookup's own timeout can answer in time.
    const api = await startTestApi({ REDIS_URL: proxy.url, REDIS_CLUSTER_NODES: "", REDIS_COMMAND_TIMEOUT_MS: "60000" });
    try {
      const query = `query Stalled { hotPosts(first: 3, window: ALL) { id } }`;
      proxy.stall();
      const lookup = await postOnce(api.url, { extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } } });
      expect(codesOf(lookup.body)).toEqual(["PERSISTED_QUERY_NOT_FOUND"]);
      proxy.resume();
      expect((await persistedQuery(api.url, query)).response.errors).toBeUndefined();
    } finally {
      proxy.resume();
      await api.close();
      await proxy.close();
    }
  });
});

describeOnSingle("PERSISTED_QUERIES=safelist", () => {
  const allowed = `query Allowed { hotPosts(first: 5, window: ALL) { id } }`;
  const listedSubscription = `subscription Listed($ids: [ID!]!) { postCounts(postIds: $ids) { id } }`;
  let api: TestApi;
  let post: string;
  beforeAll(async () => {
    const manifest = path.join(mkdtempSync(path.join(tmpdir(), "manifest-")), "persisted-query-manifest.json");
    const operations = [
      { id: sha256(allowed), name: "Allowed", type: "query", body: allowed },
      { id: sha256(listedSubscription), name: "Listed", type: "subscription", body: listedSubscription },
    ];
    writeFileSync(manifest, JSON.stringify({ format: "apollo-persisted-query-manifest", version: 1, operations }));
    api = await startTestApi({ PERSISTED_QUERIES: "safelist", PERSISTED_QUERIES_MANIFEST: manifest });
    const db = openDatabase(api.config);
    const [author] = (await createUsers(db, api.config, 1)) as [TestUser];
    await db.$disconnect();
    post = (await api.services.content.createPost(author.id, "listed", "b")).id.toString();
  });
  afterAll(async () => {
    await api.close();
  });

  it("when a client sends an operation of the manifest, by hash or by text, then it runs", async () => {
    const byHash = await postOnce(api.url, { extensions: { persistedQuery: { version: 1, sha256Hash: sha256(allowed) } } });
    expect(byHash.body.errors).toBeUndefined();
    expect(byHash.body.data).toHaveProperty("hotPosts");
    expect((await postOnce(api.url, { query: allowed })).body.errors).toBeUndefined();
  });

  it("when a client sends an operation of the manifest by GET, by hash or by text, then it runs; any other text by GET is refused", async () => {
    const get = async (params: Record<string, string>) => {
      const response = await fetch(`${api.url}graphql?${new URLSearchParams(params).toString()}`, { headers: { accept: "application/json" } });
      return { status: response.status, body: (await response.json()) as GraphQLResponse<unknown> };
    };
    const byHash = await get({ extensions: JSON.stringify({ persistedQuery: { version: 1, sha256Hash: sha256(allowed) } }) });
    expect(byHash.body.errors).toBeUndefined();
    expect((await get({ query: allowed })).body.errors).toBeUndefined();
    const other = await get({ query: `{ hotPosts(first: 9, window: ALL) { id } }` });
    expect(other.status).toBe(400);
    expect(codesOf(other.body)).toEqual(["OPERATION_NOT_IN_SAFELIST"]);
  });

  it("when a client sends a document not in the manifest that would not even validate, then it is refused for the safelist, telling nothing of the schema", async () => {
    const probe = await postOnce(api.url, { query: `{ secretField }` });
    expect(probe.status).toBe(400);
    expect(codesOf(probe.body)).toEqual(["OPERATION_NOT_IN_SAFELIST"]);
    expect(JSON.stringify(probe.body)).not.toContain("secretField");
  });

  it("when a client sends any other operation, then it is refused with OPERATION_NOT_IN_SAFELIST and HTTP 400, and registers nothing", async () => {
    const other = `query Other { hotPosts(first: 6, window: ALL) { id } }`;
    const byText = await postOnce(api.url, { query: other });
    expect(byText.status).toBe(400);
    expect(codesOf(byText.body)).toEqual(["OPERATION_NOT_IN_SAFELIST"]);
    const registering = await postOnce(api.url, { query: other, extensions: { persistedQuery: { version: 1, sha256Hash: sha256(other) } } });
    expect(codesOf(registering.body)).toEqual(["OPERATION_NOT_IN_SAFELIST"]);
    const byHash = await postOnce(api.url, { extensions: { persistedQuery: { version: 1, sha256Hash: sha256(other) } } });
    expect(codesOf(byHash.body)).toEqual(["PERSISTED_QUERY_NOT_FOUND"]);
  });

  it("when a client subscribes, then a subscription of the manifest runs and any other is refused with OPERATION_NOT_IN_SAFELIST", async () => {
    const client = createClient({ url: `${api.url.replace(/^http/, "ws")}graphql`, webSocketImpl: WebSocket, retryAttempts: 0 });
    const firstOf = (query: string) =>
      new Promise<unknown>((resolve) => {
        const stop = client.subscribe(
          { query, variables: { ids: [post] } },
          {
            next: (message) => {
              resolve(message);
              stop();
            },
            error: resolve,
            complete: () => resolve(null),
          },
        );
      });
    try {
      expect(await firstOf(listedSubscription)).toMatchObject({ data: { postCounts: { id: post } } });
      const refusal = await firstOf(`subscription($ids: [ID!]!) { postCounts(postIds: $ids) { id counts { likes } } }`);
      expect((refusal as { extensions?: { code?: string } }[])[0]?.extensions?.code).toBe("OPERATION_NOT_IN_SAFELIST");
    } finally {
      await client.dispose();
    }
  });
});

describeOnSingle("PERSISTED_QUERIES=off", () => {
  it("when a client sends a hash, then it is told persisted queries are not supported, and texts still run", async () => {
    const api = await startTestApi({ PERSISTED_QUERIES: "off" });
    try {
      const query = `{ hotPosts(first: 1, window: ALL) { id } }`;
      const byHash = await postOnce(api.url, { extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } } });
      expect(codesOf(byHash.body)).toEqual(["PERSISTED_QUERY_NOT_SUPPORTED"]);
      expect((await postOnce(api.url, { query })).body.errors).toBeUndefined();
    } finally {
      await api.close();
    }
  });
});
