// What operators see of the API: request ids, one log line per operation, the
// API's metrics, OpenTelemetry spans, keep-alive, CORS and the outbox backlog in
// readiness, each against a running API on the real services.
import { once } from "node:events";
import { createServer, request, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createApiMetrics, type ApiMetrics } from "../../../src/graphql/api-metrics.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { startTracing } from "../../../src/process/tracing.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { createUsers, openDatabase, testConfig, type TestUser } from "../../support/env.js";
import { eventually } from "../../support/pipeline.js";

let db: Database;
let user: TestUser;

beforeAll(async () => {
  const config = testConfig();
  db = openDatabase(config);
  user = (await createUsers(db, config, 1))[0] as TestUser;
});
afterAll(async () => {
  await db.$disconnect();
});

interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** One HTTP request over a fresh connection, with the headers the answer came with. */
function send(url: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const method = options.method ?? "POST";
    // A preflight carries no body, so browsers send it no Content-Type.
    const req = request(url, { method, headers: { ...(method !== "OPTIONS" && { "content-type": "application/json" }), ...options.headers } }, (res) => {
      let body = "";
      res.on("data", (chunk: Buffer) => (body += chunk.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end(options.body);
  });
}

const operation = (api: TestApi, query: string, headers: Record<string, string> = {}) =>
  send(`${api.url}graphql`, { headers, body: JSON.stringify({ query }) });

describe("request ids", () => {
  let api: TestApi;
  beforeAll(async () => (api = await startTestApi()));
  afterAll(async () => api.close());

  it("when a client sends a usable x-request-id, then the response carries the same one", async () => {
    const answer = await operation(api, "{ __typename }", { "x-request-id": "req-7f3a.client:42" });
    expect(answer.headers["x-request-id"]).toBe("req-7f3a.client:42");
  });

  it("when a client sends none, or one too long or with unsafe characters, then the response carries a new UUID", async () => {
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
    for (const sent of [undefined, "x".repeat(129), 'a"b', "two words"]) {
      const answer = await operation(api, "{ __typename }", sent === undefined ? {} : { "x-request-id": sent });
      expect(answer.headers["x-request-id"]).toMatch(uuid);
    }
  });
});

describe("the request log", () => {
  const lines: Record<string, unknown>[] = [];
  let api: TestApi;
  beforeAll(async () => {
    const logger = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    api = await startTestApi({}, { logger });
  });
  afterAll(async () => api.close());
  const linesOf = (requestId: string) => lines.filter((line) => line.requestId === requestId);

  it("when a signed-in viewer runs a named query, then exactly one JSON line tells its name, type, status, duration, viewer, request id and address", async () => {
    await operation(api, "query ReadViewer { viewer { id } }", { "x-request-id": "log-1", authorization: `Bearer ${user.token}` });
    await eventually(
      async () => linesOf("log-1").length > 0,
      5_000,
      () => JSON.stringify(lines),
    );
    expect(linesOf("log-1")).toEqual([
      expect.objectContaining({
        msg: "graphql request",
        level: 30,
        operationName: "ReadViewer",
        operationType: "query",
        status: 200,
        durationMs: expect.any(Number),
        errorCodes: [],
        viewerId: String(user.id),
        clientIp: "127.0.0.1",
      }),
    ]);
  });

  it("when an anonymous caller runs a mutation that needs a viewer, then its one line names the error code and no viewer", async () => {
    await operation(api, `mutation Like { likePost(postId: "1") { changed } }`, { "x-request-id": "log-2" });
    await eventually(
      async () => linesOf("log-2").length > 0,
      5_000,
      () => JSON.stringify(lines),
    );
    expect(linesOf("log-2")).toEqual([
      expect.objectContaining({ operationName: "Like", operationType: "mutation", errorCodes: ["UNAUTHENTICATED"], viewerId: null }),
    ]);
  });

  it("when a document does not parse, then its line has no operation, the parse error's code and status 400", async () => {
    await operation(api, "query {", { "x-request-id": "log-3" });
    await eventually(
      async () => linesOf("log-3").length > 0,
      5_000,
      () => JSON.stringify(lines),
    );
    expect(linesOf("log-3")).toEqual([
      expect.objectContaining({ operationName: null, operationType: null, status: 400, errorCodes: ["GRAPHQL_PARSE_FAILED"] }),
    ]);
  });

  it.each([
    ["log-4", { body: "{not json" }, 400, "BAD_REQUEST"],
    ["log-5", { body: JSON.stringify({ query: `{ ${"a".repeat(2_000_000)} }` }) }, 413, "PAYLOAD_TOO_LARGE"],
    ["log-6", { method: "PUT", body: "{}" }, 405, "METHOD_NOT_ALLOWED"],
  ])("when the HTTP layer refuses a request (%s), then its line has the code its body carries", async (requestId, request, status, code) => {
    const answer = await send(`${api.url}graphql`, { ...request, headers: { "x-request-id": requestId } });
    expect(answer.status).toBe(status);
    expect((JSON.parse(answer.body) as { errors: { extensions: { code: string } }[] }).errors[0]?.extensions.code).toBe(code);
    await eventually(
      async () => linesOf(requestId).length > 0,
      5_000,
      () => JSON.stringify(lines.slice(-3)),
    );
    expect(linesOf(requestId)).toEqual([expect.objectContaining({ status, errorCodes: [code] })]);
  });
});

describe("the API's metrics", () => {
  let api: TestApi;
  let metrics: ApiMetrics;
  beforeAll(async () => {
    metrics = createApiMetrics({ maxOperationNames: 3 });
    api = await startTestApi({}, { metrics });
    // The feed below must show at least one post, whose counts come from Redis.
    await db.post.create({ data: { authorId: user.id, title: "metrics", body: "counted" } });
  });
  afterAll(async () => api.close());

  it("when operations ran, then the registry shows their durations per bounded operation name, errors by code, and Redis and SQL latencies", async () => {
    const auth = { authorization: `Bearer ${user.token}` };
    await operation(api, "query ReadViewer { viewer { id } }", auth);
    await operation(api, "query ReadViewer { viewer { id } }", auth);
    await operation(api, `query Feed { feed(first: 2) { edges { node { id counts { likes } } } } }`, auth);
    await operation(api, "query Third { __typename }");
    // Past the cap of three names: counted, but under "other".
    await operation(api, "query Fourth { __typename }");
    await operation(api, "{ __typename }");
    await operation(api, "query {");
    await operation(api, `mutation Like { likePost(postId: "1") { changed } }`);
    const text = () => metrics.registry.metrics();
    // Each request is recorded once its response is complete, which may be after the client read it: wait for all eight.
    const recorded = (metricsText: string) =>
      [...metricsText.matchAll(/^likes_graphql_request_duration_seconds_count\{[^}]*\} (\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
    await eventually(async () => recorded(await text()) === 8, 5_000, text);
    const body = await text();
    const value = (series: string) => Number(new RegExp(`^${series.replace(/[{}"]/g, "\\$&")} (\\S+)$`, "m").exec(body)?.[1] ?? Number.NaN);
    expect(value('likes_graphql_request_duration_seconds_count{operation="ReadViewer",type="query"}')).toBe(2);
    expect(value('likes_graphql_request_duration_seconds_count{operation="Feed",type="query"}')).toBe(1);
    expect(value('likes_graphql_request_duration_seconds_count{operation="Third",type="query"}')).toBe(1);
    expect(value('likes_graphql_request_duration_seconds_count{operation="other",type="query"}')).toBe(1);
    expect(body).not.toContain('operation="Fourth"');
    expect(value('likes_graphql_request_duration_seconds_count{operation="anonymous",type="query"}')).toBe(1);
    expect(value('likes_graphql_request_duration_seconds_count{operation="invalid",type="none"}')).toBe(1);
    expect(value('likes_graphql_errors_total{code="GRAPHQL_PARSE_FAILED"}')).toBe(1);
    expect(value('likes_graphql_errors_total{code="UNAUTHENTICATED"}')).toBe(1);
    expect(value("likes_graphql_rate_limited_total")).toBe(0);
    // Which commands a feed sends depends on what Redis already holds (a script, or a rebuild's reads): count them all.
    const redisCommands = [...body.matchAll(/^likes_redis_command_duration_seconds_count\{command="[a-z]+"\} (\d+)$/gm)].reduce(
      (sum, m) => sum + Number(m[1]),
      0,
    );
    expect(redisCommands).toBeGreaterThan(0);
    expect(value("likes_postgres_query_duration_seconds_count")).toBeGreaterThan(0);
  });
});

describe("tracing", () => {
  it("when a request comes with a W3C traceparent, then the collector receives a span named for the operation in the caller's trace", async () => {
    const bodies: unknown[] = [];
    const collector = createServer((req, res) => {
      let body = "";
      req.on("data", (chunk: Buffer) => (body += chunk.toString()));
      req.on("end", () => {
        if (req.url === "/v1/traces") bodies.push(JSON.parse(body));
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      });
    });
    collector.listen(0, "127.0.0.1");
    await once(collector, "listening");
    const tracing = startTracing({ endpoint: `http://127.0.0.1:${(collector.address() as AddressInfo).port}`, serviceName: "likes-test" });
    const api = await startTestApi({}, { plugins: [tracing.plugin] });
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const parentSpanId = "00f067aa0ba902b7";
    try {
      await operation(api, `mutation Like { likePost(postId: "1") { changed } }`, { traceparent: `00-${traceId}-${parentSpanId}-01` });
    } finally {
      await api.close();
      // Shutting down sends what the batch processor holds.
      await tracing.close();
      collector.close();
    }
    type Span = {
      name: string;
      traceId: string;
      parentSpanId?: string;
      attributes: { key: string; value: { stringValue?: string } }[];
      status: { code?: number };
    };
    const spans = (bodies as { resourceSpans: { scopeSpans: { spans: Span[] }[] }[] }[]).flatMap((b) =>
      b.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans)),
    );
    const span = spans.find((s) => s.name === "mutation Like");
    expect(span, JSON.stringify(spans)).toBeDefined();
    expect(span?.traceId).toBe(traceId);
    expect(span?.parentSpanId).toBe(parentSpanId);
    expect(span?.attributes).toContainEqual({ key: "graphql.operation.name", value: { stringValue: "Like" } });
    // 2 is ERROR: the mutation answered UNAUTHENTICATED.
    expect(span?.status.code).toBe(2);
  });
});

describe("HTTP keep-alive", () => {
  it("when nothing is set, then responses promise to keep an idle connection 72 s, above load balancers' 60–65 s", async () => {
    const api = await startTestApi();
    try {
      expect((await operation(api, "{ __typename }")).headers["keep-alive"]).toBe("timeout=72");
    } finally {
      await api.close();
    }
  });

  it("when HTTP_KEEP_ALIVE_TIMEOUT_MS is set, then responses promise that", async () => {
    const api = await startTestApi({ HTTP_KEEP_ALIVE_TIMEOUT_MS: "125000" });
    try {
      expect((await operation(api, "{ __typename }")).headers["keep-alive"]).toBe("timeout=125");
    } finally {
      await api.close();
    }
  });
});

describe("CORS", () => {
  const preflight = (api: TestApi, origin: string) =>
    send(`${api.url}graphql`, {
      method: "OPTIONS",
      headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "content-type,authorization" },
    });

  /** The HTTP status a WebSocket upgrade to /graphql gets, sent with `origin` as a browser would (none: as a server or app would). */
  const upgradeStatus = (api: TestApi, origin?: string) =>
    new Promise<number>((resolve, reject) => {
      const socket = new WebSocket(`${api.url.replace(/^http/, "ws")}graphql`, "graphql-transport-ws", origin === undefined ? {} : { origin });
      socket.once("open", () => {
        socket.terminate();
        resolve(101);
      });
      socket.once("unexpected-response", (req, res) => {
        resolve(res.statusCode ?? 0);
        req.destroy();
      });
      socket.once("error", reject);
    });

  /** A preflight refused as browsers read it: a plain 204 without Access-Control-Allow-Origin (not a GraphQL error). */
  const expectRefusedPreflight = (answer: Answer) => {
    expect(answer.status).toBe(204);
    expect(answer.headers["access-control-allow-origin"]).toBeUndefined();
    expect(answer.headers["access-control-allow-methods"]).toBeUndefined();
    expect(answer.body).toBe("");
  };

  it("when CORS_ORIGINS lists an origin, then its preflight and WebSocket are allowed and another origin's are not", async () => {
    const api = await startTestApi({ CORS_ORIGINS: "https://app.example.com, https://admin.example.com" });
    try {
      const allowed = await preflight(api, "https://admin.example.com");
      expect(allowed.status).toBe(204);
      expect(allowed.headers["access-control-allow-origin"]).toBe("https://admin.example.com");
      expect(allowed.headers["access-control-allow-methods"]).toContain("POST");
      expectRefusedPreflight(await preflight(api, "https://evil.example.net"));
      const answer = await operation(api, "{ __typename }", { origin: "https://app.example.com" });
      expect(answer.headers["access-control-allow-origin"]).toBe("https://app.example.com");
      expect(answer.headers["access-control-expose-headers"]).toContain("x-request-id");
      expect(answer.headers["access-control-expose-headers"]).toContain("ratelimit-remaining");
      expect(await upgradeStatus(api, "https://app.example.com")).toBe(101);
      expect(await upgradeStatus(api, "https://evil.example.net")).toBe(403);
      expect(await upgradeStatus(api)).toBe(101);
    } finally {
      await api.close();
    }
  });

  it("when CORS_ORIGINS is *, then any origin's preflight is allowed", async () => {
    const api = await startTestApi({ CORS_ORIGINS: "*" });
    try {
      expect((await preflight(api, "https://anywhere.example.org")).headers["access-control-allow-origin"]).toBe("*");
    } finally {
      await api.close();
    }
  });

  it("when production sets no CORS_ORIGINS, then no other origin's preflight or WebSocket is allowed, while the API's own origin and clients that send no Origin connect", async () => {
    const api = await startTestApi({ NODE_ENV: "production", JWT_SECRET: "test-secret-of-sufficient-length", REDIS_DURABILITY: "volatile" });
    try {
      expectRefusedPreflight(await preflight(api, "https://app.example.com"));
      expect(await upgradeStatus(api, "https://app.example.com")).toBe(403);
      expect(await upgradeStatus(api)).toBe(101);
      // A page the API's own host serves calls it without CORS, and its WebSocket is let in too.
      expect(await upgradeStatus(api, new URL(api.url).origin)).toBe(101);
      expect((await operation(api, "{ __typename }", { origin: "https://app.example.com" })).headers["access-control-allow-origin"]).toBeUndefined();
    } finally {
      await api.close();
    }
  });

  it("when CORS_ORIGINS holds something that is not an origin, then the configuration is refused with a sentence saying why", () => {
    expect(() => testConfig({ CORS_ORIGINS: "https://app.example.com/path" })).toThrow(/CORS_ORIGINS: "https:\/\/app.example.com\/path" is not an origin/);
  });

  it("when CORS_ORIGINS writes an origin otherwise than browsers do, then it is kept as they write it: a lower-case host, no default port", () => {
    expect(testConfig({ CORS_ORIGINS: "https://App.Example.com:443, http://localhost:3000" }).corsOrigins).toEqual([
      "https://app.example.com",
      "http://localhost:3000",
    ]);
  });
});

describe("readiness and the outbox backlog", () => {
  it("when the outbox holds more than OUTBOX_WARN_LENGTH, then readiness stays 200 but reports degraded, naming the backlog", async () => {
    const api = await startTestApi({ OUTBOX_WARN_LENGTH: "1" });
    try {
      const auth = { authorization: `Bearer ${user.token}` };
      const created = JSON.parse(
        (await operation(api, `mutation { a: createPost(title: "t", body: "b") { id } b: createPost(title: "t", body: "b") { id } }`, auth)).body,
      ) as { data: { a: { id: string }; b: { id: string } } };
      // No pipeline runs here: both changes stay in the outbox.
      for (const id of [created.data.a.id, created.data.b.id]) await operation(api, `mutation { likePost(postId: "${id}") { changed } }`, auth);
      const ready = await send(`${api.url}health/ready`, { method: "GET" });
      expect(ready.status).toBe(200);
      const report = JSON.parse(ready.body) as { status: string; checks: Record<string, string> };
      expect(report.status).toBe("degraded");
      expect(report.checks).toMatchObject({ postgres: "ok", redis: "ok" });
      expect(report.checks.outbox).toMatch(/changes wait in the outbox, more than OUTBOX_WARN_LENGTH \(1\)/);
    } finally {
      await api.close();
    }
  });
});
