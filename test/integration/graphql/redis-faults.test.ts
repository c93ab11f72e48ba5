// Redis faults seen from a client of the API, injected by a TCP proxy between
// the API and the test's Redis. Redis out of reach (stalled, refusing) is degraded
// service, not an outage: reads answer from PostgreSQL within the deadline, sign-ins
// work, changes that need Redis answer SERVICE_UNAVAILABLE (HTTP 503, Retry-After)
// and never apply later, and Redis serves again soon after it is back.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readinessShareMs } from "../../../src/compose.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { codesOf, createUsers, dataOf, type GraphQLResponse, openDatabase, privateRedisUrl, type TestUser, uniqueTag } from "../../support/env.js";
import { liveClient } from "../../support/live.js";
import { eventually, startTestPipeline } from "../../support/pipeline.js";
import { startTcpProxy, type TcpProxy } from "../../support/tcp-proxy.js";

let proxy: TcpProxy;
let api: TestApi;
let db: Database;
let user: TestUser;
let postId: string;

const likePost = `mutation($id: ID!) { likePost(postId: $id) { changed post { counts { likes } } } }`;
const readPost = `query($id: ID!) { posts(ids: [$id]) { counts { likes } viewerHasLiked } }`;

interface Answer<T = Record<string, unknown>> extends GraphQLResponse<T> {
  readonly status: number;
  readonly retryAfter: string | null;
}

/** A GraphQL request with its HTTP status and Retry-After. */
async function call<T = Record<string, unknown>>(to: TestApi, query: string, variables: Record<string, unknown> = {}, token?: string): Promise<Answer<T>> {
  const response = await fetch(new URL("graphql", to.url), {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ query, variables }),
  });
  return { ...((await response.json()) as GraphQLResponse<T>), status: response.status, retryAfter: response.headers.get("retry-after") };
}

async function ready(to: TestApi) {
  const response = await fetch(`${to.url}health/ready`);
  return { status: response.status, body: (await response.json()) as { status: string; checks: Record<string, string> } };
}

/** Waits until a like through `to` applies again (Redis back and found so); how long that took. */
async function likesAgain(to: TestApi, token: string, id: string): Promise<number> {
  const started = Date.now();
  await eventually(
    async () => codesOf(await call(to, likePost, { id }, token)).length === 0,
    10_000,
    () => "likes still refused",
  );
  return Date.now() - started;
}

beforeAll(async () => {
  const redisUrl = new URL(privateRedisUrl());
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

describe("Redis stalled", () => {
  it("when Redis stalls, then reads answer from PostgreSQL, likes answer SERVICE_UNAVAILABLE with HTTP 503 and Retry-After, and both are served by Redis again after", async () => {
    proxy.stall();
    let read: Answer<{ posts: { counts: { likes: number }; viewerHasLiked: boolean }[] }>;
    let like: Answer;
    try {
      // Neither request can finish from Redis: the stall lasts until `finally`.
      [read, like] = await Promise.all([
        call<{ posts: { counts: { likes: number }; viewerHasLiked: boolean }[] }>(api, readPost, { id: postId }, user.token),
        call(api, likePost, { id: postId }, user.token),
      ]);
    } finally {
      proxy.resume();
    }
    expect(read.status).toBe(200);
    expect(dataOf(read).posts).toEqual([{ counts: { likes: 0 }, viewerHasLiked: false }]);
    expect(codesOf(like)).toEqual(["SERVICE_UNAVAILABLE"]);
    expect([like.status, Number(like.retryAfter)]).toEqual([503, expect.any(Number)]);
    expect(Number(like.retryAfter)).toBeGreaterThanOrEqual(1);
    // The like sent during the stall reached Redis after its deadline and changed nothing; a retry applies once.
    expect(await likesAgain(api, user.token, postId)).toBeLessThan(5_000);
    const after = dataOf(await api.gql<{ posts: { counts: { likes: number } }[] }>(readPost, { id: postId }, user.token));
    expect(after.posts[0]?.counts.likes).toBe(1);
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

  it("when Redis stalls longer than the request deadline, then a read answers from PostgreSQL before it and a like answers SERVICE_UNAVAILABLE by it, never applying", async () => {
    const redisUrl = new URL(privateRedisUrl());
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
      let answers: Answer[];
      const elapsedMs: number[] = [];
      try {
        answers = await Promise.all(
          [readPost, likePost].map(async (query) => {
            const answer = await call(strict, query, { id: target }, liker.token);
            elapsedMs.push(Date.now() - started);
            return answer;
          }),
        );
      } finally {
        slowProxy.resume();
      }
      const [read, like] = answers as [Answer, Answer];
      expect(dataOf(read)).toEqual({ posts: [{ counts: { likes: 0 }, viewerHasLiked: false }] });
      expect(codesOf(like)).toEqual(["SERVICE_UNAVAILABLE"]);
      expect(like.status).toBe(503);
      expect(Math.max(...elapsedMs)).toBeGreaterThanOrEqual(500);
      expect(Math.max(...elapsedMs)).toBeLessThan(5_000);
      // The like reached Redis after its deadline: it changed nothing.
      await new Promise((resolve) => setTimeout(resolve, 300));
      const after = dataOf(await api.gql<{ posts: { counts: { likes: number }; viewerHasLiked: boolean }[] }>(readPost, { id: target }, liker.token));
      expect(after.posts).toEqual([{ counts: { likes: 0 }, viewerHasLiked: false }]);
    } finally {
      await strict.close();
      await slowProxy.close();
    }
  });

  it("when Redis stalls, then readiness answers 200 'degraded' naming Redis within its bound, and 'ready' once Redis answers again", async () => {
    // A report taken during an earlier test's stall may still be shared.
    await new Promise((resolve) => setTimeout(resolve, readinessShareMs));
    expect(await ready(api)).toEqual({ status: 200, body: { status: "ready", checks: { postgres: "ok", "redis clock": "ok", redis: "ok", outbox: "ok" } } });
    proxy.stall();
    try {
      // A report answers every probe for a second; the next one sees the stall.
      await new Promise((resolve) => setTimeout(resolve, readinessShareMs));
      // The stall lasts until `finally`: only the probe's bound can answer this.
      const stalled = await ready(api);
      expect(stalled.status).toBe(200);
      expect(stalled.body.status).toBe("degraded");
      expect(stalled.body.checks.postgres).toBe("ok");
      expect(stalled.body.checks.redis).not.toBe("ok");
    } finally {
      proxy.resume();
    }
    await new Promise((resolve) => setTimeout(resolve, readinessShareMs));
    expect((await ready(api)).body.status).toBe("ready");
    expect(await (await fetch(`${api.url}health/live`)).json()).toEqual({ status: "live" });
  });
});

describe("Redis refusing connections", () => {
  let refusing: TcpProxy;
  let degraded: TestApi;
  let viewer: TestUser;
  let liked: string;
  let unliked: string;

  beforeAll(async () => {
    const redisUrl = new URL(privateRedisUrl());
    refusing = await startTcpProxy({ host: redisUrl.hostname, port: Number(redisUrl.port) });
    degraded = await startTestApi({ REDIS_URL: refusing.url, REDIS_COMMAND_TIMEOUT_MS: "500" });
    [viewer] = (await createUsers(db, degraded.config, 1)) as [TestUser];
    const create = async (title: string) =>
      dataOf(await degraded.gql<{ createPost: { id: string } }>(`mutation($t: String!) { createPost(title: $t, body: "b") { id } }`, { t: title }, user.token))
        .createPost.id;
    [liked, unliked] = [await create("liked"), await create("not liked")];
    // The viewer's like and follow reach PostgreSQL before Redis goes.
    const pipeline = await startTestPipeline(degraded.config);
    try {
      dataOf(await degraded.gql(likePost, { id: liked }, viewer.token));
      dataOf(await degraded.gql(`mutation($id: ID!) { followUser(userId: $id) { changed } }`, { id: user.id.toString() }, viewer.token));
      await eventually(
        async () => (await db.like.count({ where: { targetType: "post", targetId: BigInt(liked), userId: viewer.id } })) === 1,
        10_000,
        () => "the like never reached PostgreSQL",
      );
      await eventually(
        async () => (await db.follow.count({ where: { followeeId: user.id, followerId: viewer.id } })) === 1,
        10_000,
        () => "the follow never reached PostgreSQL",
      );
    } finally {
      await pipeline.stop();
    }
    refusing.refuse();
  });
  afterAll(async () => {
    refusing.resume();
    await degraded.close();
    await refusing.close();
  });

  it("when a viewer reads feeds, posts, a post, a user, entities and their liked posts, then each answers with counts and the viewer's state from PostgreSQL", async () => {
    const query = `query($ids: [ID!]!, $id: ID!, $user: ID!, $viewer: ID!, $reps: [_Any!]!) {
      feed(first: 20) { edges { node { id counts { likes } viewerHasLiked } } }
      viewer: user(id: $viewer) { likedPosts(first: 5) { edges { node { id counts { likes } } } } }
      posts(ids: $ids) { id counts { likes comments } viewerHasLiked viewerHasCollected }
      post(id: $id) { counts { likes } viewerHasLiked }
      user(id: $user) { counts { followers posts } viewerFollows }
      _entities(representations: $reps) { ... on Post { id counts { likes } viewerHasLiked } }
    }`;
    type Read = {
      feed: { edges: { node: { id: string; counts: { likes: number }; viewerHasLiked: boolean } }[] };
      posts: { id: string; counts: { likes: number }; viewerHasLiked: boolean }[];
      post: { counts: { likes: number }; viewerHasLiked: boolean };
      user: { counts: { followers: number; posts: number }; viewerFollows: boolean };
      _entities: { id: string; counts: { likes: number }; viewerHasLiked: boolean }[];
      viewer: { likedPosts: { edges: { node: { id: string; counts: { likes: number } } }[] } };
    };
    const answer = await call<Read>(
      degraded,
      query,
      { ids: [liked, unliked], id: liked, user: user.id.toString(), viewer: viewer.id.toString(), reps: [{ __typename: "Post", id: liked }] },
      viewer.token,
    );
    expect(answer.status).toBe(200);
    const read = dataOf(answer);
    const inFeed = new Map(read.feed.edges.map((e) => [e.node.id, e.node]));
    expect(inFeed.get(liked)).toEqual({ id: liked, counts: { likes: 1 }, viewerHasLiked: true });
    expect(inFeed.get(unliked)).toEqual({ id: unliked, counts: { likes: 0 }, viewerHasLiked: false });
    expect(read.posts.map((p) => [p.counts.likes, p.viewerHasLiked])).toEqual([
      [1, true],
      [0, false],
    ]);
    expect(read.post).toEqual({ counts: { likes: 1 }, viewerHasLiked: true });
    expect(read.user.viewerFollows).toBe(true);
    expect(read.user.counts.followers).toBeGreaterThanOrEqual(1);
    expect(read._entities).toEqual([{ id: liked, counts: { likes: 1 }, viewerHasLiked: true }]);
    expect(read.viewer.likedPosts.edges).toEqual([{ node: { id: liked, counts: { likes: 1 } } }]);
    // Nothing is handed to the warmer while Redis is out of reach: a load could only fail.
    await degraded.warmer.idle();
    expect(degraded.warmer.stats()).toMatchObject({ waiting: 0, loaded: 0, failedBatches: 0 });
  });

  it("when users register and sign in, then both work", async () => {
    const name = `deg_${uniqueTag()}`;
    const registered = await call<{ register: { token: string } }>(
      degraded,
      `mutation($u: String!) { register(username: $u, email: "${name}@example.com", password: "password-123") { token } }`,
      { u: name },
    );
    expect(codesOf(registered)).toEqual([]);
    const signedIn = await call<{ login: { token: string } }>(degraded, `mutation($u: String!) { login(username: $u, password: "password-123") { token } }`, {
      u: name,
    });
    expect(codesOf(signedIn)).toEqual([]);
    expect(dataOf(signedIn).login.token).toMatch(/^ey/);
  });

  it("when a viewer likes, then SERVICE_UNAVAILABLE at once with HTTP 503 and Retry-After, and readiness says degraded", async () => {
    const started = Date.now();
    const like = await call(degraded, likePost, { id: unliked }, viewer.token);
    expect(codesOf(like)).toEqual(["SERVICE_UNAVAILABLE"]);
    expect(like.status).toBe(503);
    expect(Number(like.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Date.now() - started).toBeLessThan(degraded.config.requestDeadlineMs);
    await new Promise((resolve) => setTimeout(resolve, readinessShareMs));
    const report = await ready(degraded);
    expect(report.status).toBe(200);
    expect(report.body.status).toBe("degraded");
    expect(report.body.checks.redis).not.toBe("ok");
  });

  it("when a client subscribes, then it gets the current counts from PostgreSQL, and a change once Redis is back", async () => {
    const client = liveClient(degraded.url, { authorization: `Bearer ${viewer.token}` });
    try {
      const subscription = client.subscribe<{ postCounts: { id: string; counts: { likes: number } } }>(
        `subscription($ids: [ID!]!) { postCounts(postIds: $ids) { id counts { likes } } }`,
        { ids: [liked] },
      );
      await eventually(
        async () => subscription.received.length > 0,
        5_000,
        () => "no first message",
      );
      expect(subscription.received[0]).toMatchObject({ data: { postCounts: { id: liked, counts: { likes: 1 } } }, errors: [] });

      refusing.resume();
      const [other] = (await createUsers(db, degraded.config, 1)) as [TestUser];
      const waitedMs = await likesAgain(degraded, other.token, liked);
      expect(waitedMs).toBeLessThan(5_000);
      await eventually(
        async () => subscription.received.some((r) => r.data?.postCounts.counts.likes === 2),
        5_000,
        () => `received ${JSON.stringify(subscription.received)}`,
      );
    } finally {
      await client.dispose();
    }
  });
});
