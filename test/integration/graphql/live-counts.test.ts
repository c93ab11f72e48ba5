// Live counts over graphql-ws: a real client on the API's /graphql WebSocket
// receives its posts' counts as they change, coalesced to one message an interval
// per post, from changes made through any API process.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApiMetrics } from "../../../src/graphql/api-metrics.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { codesOf, createUsers, dataOf, describeOnSingle, itOnSingle, openDatabase, openRedis, type TestUser } from "../../support/env.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { createRebuildStore } from "../../../src/stores/redis/rebuild-store.js";
import { addressSubject } from "../../../src/graphql/client-address.js";
import { liveClient, type Received } from "../../support/live.js";
import { eventually } from "../../support/pipeline.js";
import { startServiceProcess, type ServiceProcess } from "../../support/service-process.js";
import { startTcpProxy } from "../../support/tcp-proxy.js";
import WebSocket from "ws";

interface PostCounts {
  postCounts: { id: string; counts: { likes: number; reads: number; comments: number; collects: number }; viewerHasLiked?: boolean };
}

const postCounts = `subscription($ids: [ID!]!) { postCounts(postIds: $ids) { id counts { likes reads comments collects } } }`;
const likePost = `mutation($id: ID!) { likePost(postId: $id) { changed } }`;

let api: TestApi;
let db: Database;
let author: TestUser;
let users: TestUser[];

async function newPost(body = "b"): Promise<string> {
  return (await api.services.content.createPost(author.id, "live", body)).id.toString();
}

async function like(postId: string, user: TestUser): Promise<void> {
  dataOf(await api.gql(likePost, { id: postId }, user.token));
}

const messagesOf = (received: readonly Received<PostCounts>[], postId: string) => received.filter((m) => m.data?.postCounts.id === postId);
const lastLikes = (received: readonly Received<PostCounts>[], postId: string) => messagesOf(received, postId).at(-1)?.data?.postCounts.counts.likes;

/** Waits until this API process listens to `posts` posts. */
const watching = (target: TestApi, posts: number) =>
  eventually(
    async () => target.services.live?.stats().posts === posts,
    5_000,
    () => JSON.stringify(target.services.live?.stats()),
  );

beforeAll(async () => {
  // These tests send many subscribes in a burst, refused or not; the cap per connection has a test of its own.
  api = await startTestApi({ LIVE_SUBSCRIBES_PER_SECOND: "1000" });
  db = openDatabase(api.config);
  [author, ...users] = (await createUsers(db, api.config, 41)) as [TestUser, ...TestUser[]];
});
afterAll(async () => {
  await api.close();
  await db.$disconnect();
});

describe("postCounts over graphql-ws", () => {
  it("when a watched post takes a burst of likes, then the subscriber gets its counts coalesced to at most one message a second, ending at the final count, and nothing about posts it did not ask for", async () => {
    const [hot, calm, other] = [await newPost(), await newPost(), await newPost()];
    const client = liveClient(api.url);
    try {
      await client.connected;
      const subscription = client.subscribe<PostCounts>(postCounts, { ids: [hot, calm] });
      await watching(api, 2);
      const startedAt = Date.now();
      // Four waves of ten likes, 600 ms apart: changes keep coming for about two seconds.
      for (let wave = 0; wave < 4; wave++) {
        await Promise.all(users.slice(wave * 10, wave * 10 + 10).map((user) => like(hot, user)));
        if (wave === 1) await like(calm, users[0] as TestUser);
        await Promise.all(users.slice(wave * 2, wave * 2 + 2).map((user) => like(other, user)));
        await new Promise((resolve) => setTimeout(resolve, 600));
      }
      await eventually(
        async () => lastLikes(subscription.received, hot) === 40 && lastLikes(subscription.received, calm) === 1,
        5_000,
        () => JSON.stringify(subscription.received.map((m) => m.data)),
      );
      const hotMessages = messagesOf(subscription.received, hot);
      // The first message (the counts at subscribing) holds back no change; from the first change on,
      // one message per interval at most, far fewer than 40. The server spaces them a second apart as
      // it sends; arrivals may come closer by what one round of sends takes (slack for a loaded machine).
      const changes = hotMessages.slice(1);
      const gaps = changes.slice(1).map((m, i) => m.at - (changes[i] as Received<PostCounts>).at);
      expect(Math.min(...gaps)).toBeGreaterThanOrEqual(700);
      expect(hotMessages.length).toBeLessThanOrEqual(Math.ceil((Date.now() - startedAt) / 1000) + 2);
      expect(hotMessages.length).toBeGreaterThanOrEqual(2);
      // Counts only grow through the burst, and every message carries every count.
      const likes = hotMessages.map((m) => m.data?.postCounts.counts.likes ?? -1);
      expect(likes).toEqual([...likes].sort((x, y) => x - y));
      expect(hotMessages[0]?.data?.postCounts.counts).toMatchObject({ reads: 0, comments: 0, collects: 0 });
      expect(messagesOf(subscription.received, other)).toEqual([]);
      expect(subscription.received.every((m) => m.errors.length === 0)).toBe(true);
      subscription.stop();
      await watching(api, 0);
    } finally {
      await client.dispose();
    }
  });

  it("when a subscription starts, then it first gets the current counts of each of its posts, with no change made", async () => {
    const [liked, quiet] = [await newPost(), await newPost()];
    await like(liked, users[0] as TestUser);
    await like(liked, users[1] as TestUser);
    const client = liveClient(api.url);
    try {
      await client.connected;
      const subscription = client.subscribe<PostCounts>(postCounts, { ids: [liked, quiet] });
      await eventually(
        async () => messagesOf(subscription.received, liked).length > 0 && messagesOf(subscription.received, quiet).length > 0,
        5_000,
        () => JSON.stringify(subscription.received.map((m) => m.data)),
      );
      expect(lastLikes(subscription.received, liked)).toBe(2);
      expect(lastLikes(subscription.received, quiet)).toBe(0);
      subscription.stop();
      await watching(api, 0);
    } finally {
      await client.dispose();
    }
  });

  it("when a post is liked right after its subscription started, then the change comes at once, not an interval after the first counts", async () => {
    // An interval far longer than the wait below: a change held for it could not arrive in time.
    const slow = await startTestApi({ LIVE_INTERVAL_MS: "60000" });
    const client = liveClient(slow.url);
    try {
      const postId = await newPost();
      await client.connected;
      const subscription = client.subscribe<PostCounts>(postCounts, { ids: [postId] });
      await eventually(
        async () => messagesOf(subscription.received, postId).length === 1,
        5_000,
        () => JSON.stringify(subscription.received),
      );
      await like(postId, users[0] as TestUser);
      await eventually(
        async () => lastLikes(subscription.received, postId) === 1,
        10_000,
        () => JSON.stringify(subscription.received.map((m) => m.data)),
      );
      // The next change is held for the interval: one message at once, not one per change.
      await like(postId, users[1] as TestUser);
      await watching(slow, 1);
      expect(messagesOf(subscription.received, postId).map((m) => m.data?.postCounts.counts.likes)).toEqual([0, 1]);
      subscription.stop();
    } finally {
      await client.dispose();
      await slow.close();
    }
  });

  itOnSingle("when the connection carries a token, then viewer fields answer for that user; a bad token closes the connection with 4401", async () => {
    const post = await newPost();
    const viewer = users[5] as TestUser;
    const client = liveClient(api.url, { authorization: `Bearer ${viewer.token}` });
    try {
      await client.connected;
      const subscription = client.subscribe<PostCounts>(`subscription($ids: [ID!]!) { postCounts(postIds: $ids) { id viewerHasLiked counts { likes } } }`, {
        ids: [post],
      });
      await watching(api, 1);
      // Another viewer sends the same selection: the execution shared per viewer must not mix them.
      const otherViewer = liveClient(api.url, { authorization: `Bearer ${(users[6] as TestUser).token}` });
      try {
        await otherViewer.connected;
        const other = otherViewer.subscribe<PostCounts>(`subscription($ids: [ID!]!) { postCounts(postIds: $ids) { id viewerHasLiked counts { likes } } }`, {
          ids: [post],
        });
        await eventually(
          async () => api.services.live?.stats().streams === 2,
          5_000,
          () => JSON.stringify(api.services.live?.stats()),
        );
        await like(post, viewer);
        // Each got the counts as they were first (no like), then the like.
        await eventually(
          async () => lastLikes(subscription.received, post) === 1 && lastLikes(other.received, post) === 1,
          5_000,
          () => "no message after the like",
        );
        expect(subscription.received.at(-1)?.data).toEqual({ postCounts: { id: post, viewerHasLiked: true, counts: { likes: 1 } } });
        expect(other.received.at(-1)?.data).toEqual({ postCounts: { id: post, viewerHasLiked: false, counts: { likes: 1 } } });
      } finally {
        await otherViewer.dispose();
      }
    } finally {
      await client.dispose();
    }
    const refused = liveClient(api.url, { authorization: "Bearer not-a-token" });
    const { code, reason } = await refused.closed;
    expect(code).toBe(4401);
    expect(reason).toMatch(/^UNAUTHENTICATED/);
  });

  itOnSingle(
    "when a subscription asks for too many, unknown or malformed posts, or a query comes over the socket, then each is refused with its code and the connection stays usable",
    async () => {
      const post = await newPost();
      const client = liveClient(api.url);
      try {
        await client.connected;
        const codes = async (query: string, variables: Record<string, unknown>) => {
          const subscription = client.subscribe<PostCounts>(query, variables);
          await subscription.ended;
          return subscription.received.flatMap((m) => m.errors.map((e) => e.extensions?.code));
        };
        expect(await codes(postCounts, { ids: Array.from({ length: 101 }, (_, i) => String(i + 1)) })).toEqual(["BAD_USER_INPUT"]);
        expect(await codes(postCounts, { ids: [] })).toEqual(["BAD_USER_INPUT"]);
        expect(await codes(postCounts, { ids: ["01"] })).toEqual(["BAD_USER_INPUT"]);
        expect(await codes(postCounts, { ids: [{ not: "an id" }] })).toEqual(["BAD_USER_INPUT"]);
        expect(await codes(postCounts, { ids: [post, "a\u0000"] })).toEqual(["BAD_USER_INPUT"]);
        expect(await codes(`subscription { postCounts(postIds: ["1"]) { id } `, {})).toEqual(["GRAPHQL_PARSE_FAILED"]);
        expect(await codes(postCounts, { ids: [post, "9100000000000000007"] })).toEqual(["NOT_FOUND"]);
        expect(await codes(`query { feed(first: 1) { edges { cursor } } }`, {})).toEqual(["OPERATION_NOT_SUPPORTED"]);
        expect(await codes(`subscription { postCounts(postIds: ["1"]) { nope } }`, {})).toEqual(["GRAPHQL_VALIDATION_FAILED"]);
        expect(await codes(`subscription { postCounts(postIds: ["1"]) @skip(if: true) { id } }`, {})).toEqual(["GRAPHQL_VALIDATION_FAILED"]);
        const open = Array.from({ length: api.config.live.maxSubscriptions }, () => client.subscribe<PostCounts>(postCounts, { ids: [post] }));
        await watching(api, 1);
        expect(await codes(postCounts, { ids: [post] })).toEqual(["TOO_MANY_SUBSCRIPTIONS"]);
        for (const subscription of open) subscription.stop();
        await watching(api, 0);
      } finally {
        await client.dispose();
      }
    },
  );

  itOnSingle(
    "when a client sends what the protocol does not allow, then its connection is closed with the protocol's code and the server goes on serving",
    async () => {
      /** Opens a raw socket, sends `frames` and answers the close code. */
      const closeCodeAfter = async (frames: (string | Buffer)[], protocol = "graphql-transport-ws") => {
        const socket = new WebSocket(new URL("graphql", api.url).toString().replace(/^http/, "ws"), protocol);
        socket.on("error", () => {});
        const closed = new Promise<number>((resolve) => socket.on("close", (code) => resolve(code)));
        const opened = await Promise.race([new Promise<true>((resolve) => socket.on("open", () => resolve(true))), closed.then(() => false)]);
        if (opened) for (const frame of frames) socket.send(frame);
        return closed;
      };
      expect(await closeCodeAfter(["not json"])).toBe(4400);
      expect(await closeCodeAfter([JSON.stringify({ type: "subscribe", id: "1", payload: { query: postCounts } })])).toBe(4401);
      expect(await closeCodeAfter([JSON.stringify({ type: "connection_init" }), JSON.stringify({ type: "connection_init" })])).toBe(4429);
      expect(await closeCodeAfter([JSON.stringify({ type: "connection_init" }), JSON.stringify({ type: "next", id: "1", payload: {} })])).toBe(4400);
      expect(await closeCodeAfter([Buffer.alloc(api.config.limits.bodyBytes + 1, 1)])).toBe(1009);
      // The retired subscriptions-transport-ws protocol: no protocol agreed, so the client gives up the handshake.
      expect(await closeCodeAfter([JSON.stringify({ type: "connection_init" })], "graphql-ws")).toBe(1006);
      const client = liveClient(api.url);
      await client.connected;
      await client.dispose();
    },
  );

  itOnSingle("when a subscription is sent over plain HTTP, then it is OPERATION_NOT_SUPPORTED, not an internal error", async () => {
    const response = await api.gql(postCounts, { ids: ["1"] });
    expect(codesOf(response)).toEqual(["OPERATION_NOT_SUPPORTED"]);
  });
});

describe("postCounts across API processes", () => {
  let other: ServiceProcess;
  beforeAll(async () => {
    other = await startServiceProcess(api.config, { PIPELINE: "off", WEB_CONCURRENCY: "1", REDIS_DURABILITY: "volatile" });
  }, 60_000);
  afterAll(async () => {
    await other.stop("SIGTERM");
  });

  it("when a post is liked through one API process, then a subscriber connected to another process receives the new counts", async () => {
    const post = await newPost();
    const client = liveClient(other.url);
    try {
      await client.connected;
      const subscription = client.subscribe<PostCounts>(postCounts, { ids: [post] });
      // The other process cannot be asked when it listens: users like, one a turn, until a message arrives.
      let likers = 0;
      await eventually(
        async () => {
          if (subscription.received.length === 0) await like(post, users[likers++] as TestUser);
          await new Promise((resolve) => setTimeout(resolve, 200));
          return subscription.received.length > 0;
        },
        10_000,
        () =>
          `no message on the other process; it logged:\n${other
            .output()
            .split("\n")
            .filter((l) => !l.includes('"component":"request"'))
            .slice(-15)
            .join("\n")}`,
      );
      await Promise.all(users.slice(likers, likers + 5).map((user) => like(post, user)));
      await eventually(
        async () => lastLikes(subscription.received, post) === likers + 5,
        5_000,
        () => JSON.stringify(subscription.received.map((m) => m.data)),
      );
    } finally {
      await client.dispose();
    }
  });

  itOnSingle("when the process stops, then its WebSocket clients are closed with 1001 (going away)", async () => {
    const client = liveClient(other.url);
    await client.connected;
    const code = await other.stop("SIGTERM");
    expect(code).toBe(0);
    expect((await client.closed).code).toBe(1001);
  });
});

describeOnSingle("a slow subscriber", () => {
  it("when a client stops reading while its posts keep changing, then the server drops it and releases what it held, instead of holding more and more for it", async () => {
    const metrics = createApiMetrics();
    const slowApi = await startTestApi(
      { LIVE_INTERVAL_MS: "100", LIVE_SEND_TIMEOUT_MS: "1000", LIVE_MAX_BUFFERED_BYTES: "65536", VIEWS_FLUSH_INTERVAL_MS: "50" },
      { metrics },
    );
    const metric = async (name: string) => (await metrics.registry.getSingleMetric(name)?.get())?.values[0]?.value;
    const proxy = await startTcpProxy({ host: "127.0.0.1", port: Number(new URL(slowApi.url).port) }, "http");
    // Big posts, so that what the client does not read fills the sockets' buffers within a second or two.
    const body = "x".repeat(20_000);
    // Ten at a time: a hundred transactions at once outwait Prisma's start on a busy machine.
    const posts: string[] = [];
    for (let i = 0; i < 100; i += 10) posts.push(...(await Promise.all(Array.from({ length: 10 }, () => newPost(body)))));
    const client = liveClient(proxy.url.replace(/\/?$/, "/"));
    let flooding = true;
    try {
      await client.connected;
      const subscription = client.subscribe<{ postCounts: { id: string; body: string } }>(
        `subscription($ids: [ID!]!) { postCounts(postIds: $ids) { id body counts { reads } } }`,
        {
          ids: posts,
        },
      );
      await watching(slowApi, 100);
      expect([await metric("likes_live_connections"), await metric("likes_live_subscriptions"), await metric("likes_live_posts_watched")]).toEqual([1, 1, 100]);
      const flood = (async () => {
        while (flooding) {
          await slowApi.gql(`mutation($ids: [ID!]!) { recordViews(postIds: $ids) }`, { ids: posts });
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      })();
      await eventually(
        async () => subscription.received.length > 0,
        5_000,
        () => "no message before the stall",
      );
      proxy.stall();
      // What waits in the server for the client, sampled until it is dropped.
      let mostHeld = 0;
      const sampler = setInterval(() => (mostHeld = Math.max(mostHeld, slowApi.live?.bufferedBytes() ?? 0)), 20);
      await eventually(
        async () => slowApi.live?.droppedSlow() === 1,
        20_000,
        () => `not dropped; ${slowApi.live?.connections()} connections`,
      );
      clearInterval(sampler);
      expect(slowApi.live?.connections()).toBe(0);
      // The subscription let go of its posts: nothing is read or held for the dropped client.
      await watching(slowApi, 0);
      expect(slowApi.services.live?.stats().streams).toBe(0);
      expect([await metric("likes_live_clients_dropped_total"), await metric("likes_live_connections")]).toEqual([1, 0]);
      flooding = false;
      await flood;
      // At most the bound and the one message that crossed it, though the posts changed ten times a second each.
      expect(mostHeld).toBeLessThanOrEqual(65_536 + 25_000);
    } finally {
      flooding = false;
      proxy.resume();
      await client.dispose();
      await proxy.close();
      await slowApi.close();
    }
  });
});

describe("subscriptions to cold posts", () => {
  it("when an anonymous client subscribes over and over to posts Redis does not hold, then none is loaded, each subscribe pays their cold reads until the address's budget refuses, and a connection's burst past its cap is refused", async () => {
    const crawled = await startTestApi({ RATE_LIMIT_IP_QUERY_COST: "500", LIVE_SUBSCRIBES_PER_SECOND: "3" });
    const client = liveClient(crawled.url);
    const redis = await openRedis();
    try {
      const posts = await Promise.all(Array.from({ length: 20 }, () => newPost("cold")));
      const targets = posts.map((id) => ({ type: "post" as const, id: BigInt(id) }));
      const keys = createRedisKeys(crawled.config.redisPartitions);
      const rebuilds = createRebuildStore(redis, keys);
      await Promise.all(targets.map((t) => rebuilds.drop(t)));
      // The address's budget starts full: earlier files spent it from the same address, under other limits.
      await Promise.all(["127.0.0.1", "::ffff:127.0.0.1", "::1"].map((ip) => redis.del(keys.rateBudget("ipQueryCost", addressSubject(ip)))));
      await client.connected;
      // 20 cold posts cost 200 of the address's 500 units: two subscribes, then a refusal.
      const codes: (string | undefined)[][] = [];
      for (let i = 0; i < 3; i++) codes.push((await subscribeOnce(client, posts)).errors.map((e) => e.extensions?.code));
      expect(codes).toEqual([[], [], ["RATE_LIMITED"]]);
      expect(await rebuilds.held(targets)).toEqual(targets.map(() => "absent"));
      expect(crawled.warmer.stats().loaded).toBe(0);
      // A burst of four subscribes on a new connection: its three a second pass, the fourth is refused before it reads anything.
      const bursting = liveClient(crawled.url);
      try {
        const warm = await newPost("warm");
        const burst = await Promise.all([0, 1, 2, 3].map(() => subscribeOnce(bursting, [warm])));
        const refused = burst.filter((r) => r.errors.length > 0);
        expect(refused.map((r) => r.errors.map((e) => e.extensions?.code))).toEqual([["RATE_LIMITED"]]);
        expect(refused[0]?.errors[0]?.message).toMatch(/subscribe messages a second/);
      } finally {
        await bursting.dispose();
      }
    } finally {
      redis.disconnect();
      await client.dispose();
      await crawled.close();
    }
  });
});

/** Subscribes to `posts`, and answers the first message (or the refusal) once it arrives; the subscription then ends. */
async function subscribeOnce(client: ReturnType<typeof liveClient>, posts: readonly string[]): Promise<Received<PostCounts>> {
  const subscription = client.subscribe<PostCounts>(postCounts, { ids: posts });
  await eventually(
    async () => subscription.received.length > 0,
    5_000,
    () => "no message",
  );
  subscription.stop();
  return subscription.received[0] as Received<PostCounts>;
}
