// Redis faults seen from a client of the API, injected by a TCP proxy between
// the API and the test's Redis: a stall must answer a coded error within the
// command timeout, not hold the request for as long as Redis stalls.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { readinessShareMs } from "../../../src/compose.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { codesOf, createUsers, dataOf, openDatabase, type TestUser } from "../../support/env.js";
import { startTcpProxy, type TcpProxy } from "../../support/tcp-proxy.js";

let proxy: TcpProxy;
let api: TestApi;
let db: Database;
let user: TestUser;
let postId: string;

const likePost = `mutation($id: ID!) { likePost(postId: $id) { changed post { counts { likes } } } }`;
const readPost = `query($id: ID!) { posts(ids: [$id]) { counts { likes } viewerHasLiked } }`;

beforeAll(async () => {
  const redisUrl = new URL(inject("redisUrl"));
  proxy = await startTcpProxy({ host: redisUrl.hostname, port: Number(redisUrl.port) });
  api = await startTestApi({ REDIS_URL: proxy.url, REDIS_COMMAND_TIMEOUT_MS: "500" });
  db = openDatabase(api.config);
  user = (await createUsers(db, api.config, 1))[0] as TestUser;
  const created = await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "t", body: "b") { id } }`, {}, user.token);
  postId = dataOf(created).createPost.id;
  // Warm: the post's counters are in Redis and its row in the process.
  dataOf(await api.gql(readPost, { id: postId }, user.token));
});
afterAll(async () => {
  proxy.resume();
  await api.close();
  await proxy.close();
  await db.$disconnect();
});

describe("Redis faults through the API", () => {
  it("when Redis stalls, then reads and likes answer SERVICE_UNAVAILABLE while it still stalls, and work again after", async () => {
    proxy.stall();
    try {
      // Neither request can finish unless the command timeout answers it: the stall lasts until `finally`.
      const [read, like] = await Promise.all([api.gql(readPost, { id: postId }, user.token), api.gql(likePost, { id: postId }, user.token)]);
      expect(codesOf(read)).toEqual(["SERVICE_UNAVAILABLE"]);
      expect(codesOf(like)).toEqual(["SERVICE_UNAVAILABLE"]);
    } finally {
      proxy.resume();
    }
    // The like sent during the stall reached Redis after its deadline and changed nothing; a retry applies.
    const retried = dataOf(await api.gql<{ likePost: { changed: boolean; post: { counts: { likes: number } } } }>(likePost, { id: postId }, user.token));
    expect(retried.likePost).toEqual({ changed: true, post: { counts: { likes: 1 } } });
  });

  it("when a like is held in a stalled connection and the user then likes and unlikes through another process, then the held like never applies", async () => {
    const other = await startTestApi();
    try {
      const [liker] = (await createUsers(db, api.config, 1)) as [TestUser];
      const target = dataOf(await other.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "held", body: "b") { id } }`, {}, liker.token))
        .createPost.id;
      dataOf(await api.gql(readPost, { id: target }, liker.token));
      proxy.stall();
      let held: Awaited<ReturnType<typeof api.gql>>;
      try {
        held = await api.gql(likePost, { id: target }, liker.token);
        const toggle = (op: "likePost" | "unlikePost") =>
          other.gql<Record<string, { changed: boolean }>>(`mutation($id: ID!) { ${op}(postId: $id) { changed } }`, { id: target }, liker.token);
        expect(dataOf(await toggle("likePost"))).toEqual({ likePost: { changed: true } });
        expect(dataOf(await toggle("unlikePost"))).toEqual({ unlikePost: { changed: true } });
      } finally {
        // The held bytes reach Redis now, after the user's unlike.
        proxy.resume();
      }
      expect(codesOf(held)).toEqual(["SERVICE_UNAVAILABLE"]);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const read = dataOf(await other.gql<{ posts: { counts: { likes: number }; viewerHasLiked: boolean }[] }>(readPost, { id: target }, liker.token));
      expect(read.posts).toEqual([{ counts: { likes: 0 }, viewerHasLiked: false }]);
    } finally {
      await other.close();
    }
  });

  it("when Redis stalls longer than the request deadline, then reads and likes answer SERVICE_UNAVAILABLE by the deadline, not the command timeout, and the like never applies", async () => {
    const redisUrl = new URL(inject("redisUrl"));
    const slowProxy = await startTcpProxy({ host: redisUrl.hostname, port: Number(redisUrl.port) });
    // Commands would wait 10 s: only the request's deadline can answer within the test's bound.
    const strict = await startTestApi({ REDIS_URL: slowProxy.url, REDIS_COMMAND_TIMEOUT_MS: "10000", REQUEST_DEADLINE_MS: "600" });
    try {
      const [liker] = (await createUsers(db, api.config, 1)) as [TestUser];
      const target = dataOf(await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "deadline", body: "b") { id } }`, {}, liker.token))
        .createPost.id;
      dataOf(await strict.gql(readPost, { id: target }, liker.token));
      slowProxy.stall();
      const started = Date.now();
      let answers: Awaited<ReturnType<typeof api.gql>>[];
      let elapsedMs: number;
      try {
        answers = await Promise.all([strict.gql(readPost, { id: target }, liker.token), strict.gql(likePost, { id: target }, liker.token)]);
        elapsedMs = Date.now() - started;
      } finally {
        slowProxy.resume();
      }
      expect(answers.map(codesOf)).toEqual([["SERVICE_UNAVAILABLE"], ["SERVICE_UNAVAILABLE"]]);
      expect(elapsedMs).toBeGreaterThanOrEqual(500);
      expect(elapsedMs).toBeLessThan(5_000);
      // The like reached Redis after its deadline: it changed nothing.
      await new Promise((resolve) => setTimeout(resolve, 300));
      const read = dataOf(await api.gql<{ posts: { counts: { likes: number }; viewerHasLiked: boolean }[] }>(readPost, { id: target }, liker.token));
      expect(read.posts).toEqual([{ counts: { likes: 0 }, viewerHasLiked: false }]);
    } finally {
      await strict.close();
      await slowProxy.close();
    }
  });

  it("when Redis stalls, then readiness answers 503 naming Redis within its bound, and 200 once Redis answers again", async () => {
    const ready = async () => {
      const response = await fetch(`${api.url}health/ready`);
      return { status: response.status, body: (await response.json()) as { status: string; checks: Record<string, string> } };
    };
    // A report taken during an earlier test's stall may still be shared.
    await new Promise((resolve) => setTimeout(resolve, readinessShareMs));
    expect(await ready()).toEqual({ status: 200, body: { status: "ready", checks: { postgres: "ok", redis: "ok", outbox: "ok" } } });
    proxy.stall();
    try {
      // A report answers every probe for a second; the next one sees the stall.
      await new Promise((resolve) => setTimeout(resolve, readinessShareMs));
      // The stall lasts until `finally`: only the probe's bound can answer this.
      const stalled = await ready();
      expect(stalled.status).toBe(503);
      expect(stalled.body.checks.postgres).toBe("ok");
      expect(stalled.body.checks.redis).not.toBe("ok");
    } finally {
      proxy.resume();
    }
    await new Promise((resolve) => setTimeout(resolve, readinessShareMs));
    expect((await ready()).status).toBe(200);
    expect(await (await fetch(`${api.url}health/live`)).json()).toEqual({ status: "live" });
  });
});
