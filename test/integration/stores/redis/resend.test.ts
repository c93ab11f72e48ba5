// A reply lost with its connection: ioredis re-sends the command on the next
// connection, so the script runs twice. It must change nothing the second time
// and answer as the first time did.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { LikeableTarget, Target } from "../../../../src/domain/model/index.js";
import type { RedisClient } from "../../../../src/stores/redis/client.js";
import { createCounterStore } from "../../../../src/stores/redis/counter-store.js";
import { createRedisKeys } from "../../../../src/stores/redis/keys.js";
import { createMembershipStore } from "../../../../src/stores/redis/membership-store.js";
import { createRebuildStore } from "../../../../src/stores/redis/rebuild-store.js";
import { versionOf } from "../../../../src/stores/versions.js";
import { createListStore } from "../../../../src/stores/redis/list-store.js";
import { createViewStore } from "../../../../src/stores/redis/view-store.js";
import type { Catalog } from "../../../../src/domain/catalog.js";
import type { CounterService } from "../../../../src/domain/counters.js";
import { createViewService, type ViewServiceOptions } from "../../../../src/domain/views.js";
import { openRedis, privateRedisUrl } from "../../../support/env.js";
import { startTcpProxy, type TcpProxy } from "../../../support/tcp-proxy.js";

const keys = createRedisKeys(1024);
let direct: RedisClient;
let proxy: TcpProxy;
let proxied: RedisClient;
let nextId = BigInt(Date.now()) * 1000n + 500_000n;

beforeAll(async () => {
  direct = await openRedis();
  const url = new URL(privateRedisUrl());
  proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
  proxied = await openRedis({ url: proxy.url });
  // The resets below are the point; ioredis reports each one.
  proxied.on("error", () => undefined);
});
afterEach(() => proxy.resume());
afterAll(async () => {
  proxied.disconnect();
  await proxy.close();
  await direct.quit();
});

async function until(condition: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error("condition not met within 2 s");
}

/** Runs `call` through the proxy with its reply dropped, and resets the connection once `ran` says Redis executed it. */
async function withLostReply<T>(call: () => Promise<T>, ran: () => Promise<boolean>): Promise<T> {
  const accepted = proxy.accepted;
  proxy.dropReplies();
  const pending = call();
  await until(ran);
  proxy.reset();
  const result = await pending;
  // The answer came over a new connection: the command was re-sent.
  expect(proxy.accepted).toBeGreaterThan(accepted);
  return result;
}

async function knownPost(): Promise<LikeableTarget> {
  const target: LikeableTarget = { type: "post", id: nextId++ };
  await createCounterStore(direct, keys).init(target, { like: 0 }, 1n);
  return target;
}

/**
 * A view service whose Redis client goes through the proxy and gives up on a command after
 * 300 ms, as REDIS_COMMAND_TIMEOUT_MS would. Its catalog says every post exists; no store
 * behaviour is stood in for.
 */
async function viewServiceThroughProxy(options: Partial<ViewServiceOptions> = {}) {
  const timing = await openRedis({ url: proxy.url, commandTimeoutMs: 300 });
  timing.on("error", () => undefined);
  const catalog = { posts: async (ids: readonly bigint[]) => ids.map((id) => ({ id, authorId: 1n, title: "t", body: "b", createdAt: new Date() })) };
  const views = createViewService({ store: createViewStore(timing, keys), catalog: catalog as unknown as Catalog, counters: {} as CounterService, ...options });
  return { views, disconnect: () => timing.disconnect() };
}

describe("writes re-sent after a lost reply", () => {
  it("when a like's reply is lost and the like is re-sent, then it counts once and answers changed", async () => {
    const target = await knownPost();
    const likes = createMembershipStore(proxied, keys);
    const result = await withLostReply(
      () => likes.add("like", target, 77n),
      async () => (await direct.hget(keys.counters(target), "like")) === "1",
    );
    expect(result).toMatchObject({ kind: "applied", changed: true, counts: { like: 1 } });
    expect(await direct.hget(keys.counters(target), "like")).toBe("1");
    expect(await direct.xlen(keys.outbox(target))).toBeGreaterThan(0);
  });

  it("when an unlike's reply is lost and the unlike is re-sent, then it answers changed and the count drops once", async () => {
    const target = await knownPost();
    await createMembershipStore(direct, keys).add("like", target, 78n);
    await createMembershipStore(direct, keys).add("like", target, 79n);
    const result = await withLostReply(
      () => createMembershipStore(proxied, keys).remove("like", target, 78n),
      async () => (await direct.hget(keys.counters(target), "like")) === "1",
    );
    expect(result).toMatchObject({ kind: "applied", changed: true, counts: { like: 1 } });
  });

  it("when a collect's and a follow's replies are lost and they are re-sent, then each counts once", async () => {
    const target = await knownPost();
    const collected = await withLostReply(
      () => createMembershipStore(proxied, keys).add("collect", target, 80n),
      async () => (await direct.hget(keys.counters(target), "collect")) === "1",
    );
    expect(collected).toMatchObject({ kind: "applied", changed: true, counts: { collect: 1 } });
    const user: Target = { type: "user", id: nextId++ };
    await createCounterStore(direct, keys).init(user, { followers: 0 });
    const followed = await withLostReply(
      () => createMembershipStore(proxied, keys).add("follow", user, 81n),
      async () => (await direct.hget(keys.counters(user), "followers")) === "1",
    );
    expect(followed).toMatchObject({ kind: "applied", changed: true, counts: { followers: 1 } });
    expect(await direct.hget(keys.counters(user), "followers")).toBe("1");
  });

  it("when the reply to a lock's acquire is lost and the acquire is re-sent, then it finds its own token and holds the lock", async () => {
    const target = { type: "post", id: nextId++ } as const;
    const lock = keys.rebuildLock(target);
    const token = await withLostReply(
      () => createRebuildStore(proxied, keys).lock(target, 30_000),
      async () => (await direct.exists(lock)) === 1,
    );
    expect(token).not.toBeNull();
    expect(await direct.get(lock)).toBe(token);
    // Another process still finds it taken.
    expect(await createRebuildStore(direct, keys).lock(target, 30_000)).toBeNull();
    await createRebuildStore(direct, keys).unlock(target, token as string);
    expect(await direct.exists(lock)).toBe(0);
  });

  it("when an author's credit is re-sent after a lost reply, then it is set once: a credit is a value with its sequence number", async () => {
    const author: Target = { type: "user", id: nextId++ };
    await createCounterStore(direct, keys).init(author, { likesReceived: 10 });
    await withLostReply(
      () => createCounterStore(proxied, keys).mirror([{ target: author, name: "likesReceived", value: 15, seq: 3n }]),
      async () => (await direct.hget(keys.counters(author), "likesReceived")) === "15",
    );
    expect(await direct.hget(keys.counters(author), "likesReceived")).toBe("15");
    // A late, older write does not move it back; a newer one does.
    await createCounterStore(direct, keys).mirror([{ target: author, name: "likesReceived", value: 14, seq: 2n }]);
    expect(await direct.hget(keys.counters(author), "likesReceived")).toBe("15");
    await createCounterStore(direct, keys).mirror([{ target: author, name: "likesReceived", value: 16, seq: 4n }]);
    expect(await direct.hget(keys.counters(author), "likesReceived")).toBe("16");
  });

  it("when a flush of views is re-sent after a lost reply, then its views count once", async () => {
    const target = await knownPost();
    const views = createViewStore(proxied, keys);
    const result = await withLostReply(
      () => views.add(target, 7, { sender: "resend-test", seq: 1 }),
      async () => (await direct.hget(keys.counters(target), "read")) === "7",
    );
    expect(result).toEqual({ kind: "counted", views: 7 });
    expect(await direct.hget(keys.counters(target), "read")).toBe("7");
    expect(await direct.hget(keys.counters(target), "vt")).toBe("7");
  });

  it("when two processes flush views, then both count; a flush retried under its number counts once, and a stale one after a newer one counts nothing", async () => {
    const target = await knownPost();
    const views = createViewStore(direct, keys);
    await views.add(target, 1, { sender: "a", seq: 1 });
    await views.add(target, 1, { sender: "b", seq: 1 });
    expect(await direct.hget(keys.counters(target), "read")).toBe("2");
    expect(await views.add(target, 1, { sender: "b", seq: 1 })).toEqual({ kind: "counted", views: 2 });
    await views.add(target, 3, { sender: "b", seq: 5 });
    expect(await views.add(target, 1, { sender: "b", seq: 4 })).toEqual({ kind: "counted", views: 5 });
    expect(await direct.hget(keys.counters(target), "read")).toBe("5");
    expect(Number(await direct.pttl(keys.viewFlushes(target, "b")))).toBeGreaterThan(590_000);
  });

  it("when a flush of views times out while Redis stalls and reaches it afterwards, then it counts nothing there and the view service's retry counts the views once", async () => {
    const target = await knownPost();
    const failures: unknown[] = [];
    const { views, disconnect } = await viewServiceThroughProxy({ onFlushFailure: (error) => failures.push(error) });
    try {
      expect(await views.record([target.id, target.id, target.id])).toBe(3);
      // Nothing passes: the flush's command waits in front of Redis, and the client gives up on it.
      proxy.stall();
      await views.flush();
      expect(failures).toHaveLength(1);
      await views.record([target.id]);
      // Redis answers again and runs the command it was sent, past its deadline: it counts nothing.
      proxy.resume();
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await direct.hget(keys.counters(target), "read")).toBeNull();
      // The retry is the same flush; the view that came meanwhile waits for the next flush.
      await views.flush();
      expect(await direct.hget(keys.counters(target), "read")).toBe("3");
      await views.flush();
      expect(await direct.hget(keys.counters(target), "read")).toBe("4");
      expect(failures).toHaveLength(1);
    } finally {
      proxy.resume();
      await views.close();
      disconnect();
    }
  });

  it("when a flush of views is held past its deadline, retried, and arrives after the post forgot its number, then it counts nothing", async () => {
    const target = await knownPost();
    const timing = await openRedis({ url: proxy.url, commandTimeoutMs: 300 });
    timing.on("error", () => undefined);
    try {
      const flush = { sender: "held-flush", seq: 1 };
      proxy.stall();
      await expect(createViewStore(timing, keys).add(target, 5, flush)).rejects.toThrow();
      // The sender's retry of the same flush, over a connection that works.
      expect(await createViewStore(direct, keys).add(target, 5, flush)).toEqual({ kind: "counted", views: 5 });
      // Ten minutes on, the post no longer holds the sender's last number.
      await direct.del(keys.viewFlushes(target, flush.sender));
      proxy.resume();
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await direct.hget(keys.counters(target), "read")).toBe("5");
    } finally {
      proxy.resume();
      timing.disconnect();
    }
  });

  it("when a persisted like's list write is held past its deadline and arrives after a later unlike and the list's records expired, then the list does not show the like", async () => {
    const user = nextId++;
    const timing = await openRedis({ url: proxy.url, commandTimeoutMs: 300 });
    timing.on("error", () => undefined);
    const change = (member: boolean, micros: bigint) => ({ targetId: 77n, member, version: versionOf(1n, micros), at: new Date(Number(micros)) });
    try {
      const lists = createListStore(direct, keys);
      await lists.begin("like", user);
      await lists.finish("like", user, [], null);
      proxy.stall();
      await expect(createListStore(timing, keys).applyCommitted([{ relation: "like", userId: user, changes: [change(true, 1_000n)] }])).rejects.toThrow();
      await lists.applyCommitted([{ relation: "like", userId: user, changes: [change(false, 2_000n)] }]);
      // Two minutes on, the records of committed changes are gone.
      await direct.del(keys.list("like", user).recent);
      proxy.resume();
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect((await lists.read("like", user))?.entries ?? []).toEqual([]);
    } finally {
      proxy.resume();
      timing.disconnect();
    }
  });

  it("when the process shuts down while Redis is unreachable, then shutdown keeps flushing for its limit, reports the views lost and takes no more", async () => {
    const target = await knownPost();
    const lost: number[] = [];
    const { views, disconnect } = await viewServiceThroughProxy({ closeWithinMs: 1_000, onViewsLost: (count) => lost.push(count) });
    try {
      await views.record([target.id, target.id, target.id, target.id]);
      proxy.refuse();
      const started = Date.now();
      await views.close();
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(lost).toEqual([4]);
      await expect(views.record([target.id])).rejects.toMatchObject({ code: "SERVICE_UNAVAILABLE" });
      proxy.resume();
      // A command the client had queued may still reach Redis once it answers, past its deadline: it counts nothing.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await direct.hget(keys.counters(target), "read")).toBeNull();
    } finally {
      proxy.resume();
      disconnect();
    }
  });

  it("when Redis refuses a flush for longer than the service retries it, then the views are reported lost and never count, even when the held flush reaches Redis", async () => {
    const target = await knownPost();
    const lost: number[] = [];
    // No time to retry in: the first attempt times out (300 ms) past the window.
    const { views, disconnect } = await viewServiceThroughProxy({ retryForMs: 200, onViewsLost: (count) => lost.push(count) });
    try {
      await views.record([target.id, target.id, target.id]);
      proxy.stall();
      await views.flush();
      expect(lost).toEqual([3]);
      // The stalled command still reaches Redis once it answers, past its deadline; nothing sends it again.
      proxy.resume();
      await new Promise((resolve) => setTimeout(resolve, 200));
      await views.flush();
      await views.flush();
      expect(await direct.hget(keys.counters(target), "read")).toBeNull();
    } finally {
      proxy.resume();
      await views.close();
      disconnect();
    }
  });
});
