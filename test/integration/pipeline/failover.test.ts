// A failover that lost acknowledged writes, on a primary and a replica of the
// test's own behind a TCP proxy (the address a failover keeps): the replica is cut
// off (SIGSTOP, its link killed), likes and an unlike are acknowledged by the
// primary alone and carried to PostgreSQL by the pipeline, the primary is killed
// (SIGKILL) and the replica promoted. The promoted replica holds the post, and a
// user's complete member index, as they were before those changes; none of the
// service's answers may contradict them. Then the same again with the pipeline
// stopped, so that no store holds the like the primary acknowledged alone: the API
// process that acknowledged it reports it.
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LikeableTarget } from "../../../src/domain/model/index.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { databaseMembers } from "../../support/agreement.js";
import { startTestApi, type TestApi } from "../../support/api.js";
import { createUsers, dataOf, openDatabase, testConfig, type TestUser } from "../../support/env.js";
import { eventually, startTestPipeline, type TestPipeline } from "../../support/pipeline.js";
import { redisServers, until } from "../../support/redis-servers.js";
import { startTcpProxy, type TcpProxy } from "../../support/tcp-proxy.js";

const servers = redisServers();
let primaryPort: number;
let replicaPort: number;
let proxy: TcpProxy;
let api: TestApi;
let pipeline: TestPipeline;
let users: TestUser[];
const db = openDatabase();

beforeAll(async () => {
  primaryPort = await servers.start();
  replicaPort = await servers.start({ replicaOf: primaryPort });
  proxy = await startTcpProxy({ host: "127.0.0.1", port: primaryPort });
  const overrides = { REDIS_URL: proxy.url };
  api = await startTestApi(overrides);
  pipeline = await startTestPipeline(testConfig(overrides));
  users = await createUsers(db, api.config, 3);
}, 30_000);

afterAll(async () => {
  await pipeline?.stop();
  await api?.close();
  await proxy?.close();
  await db.$disconnect();
  servers.stop();
});

const [author, first, second] = [0, 1, 2];
type Changed = { changed: boolean };

const change = (mutation: "likePost" | "unlikePost", post: string, user: number) =>
  api.gql<Record<string, Changed>>(`mutation($id: ID!) { ${mutation}(postId: $id) { changed } }`, { id: post }, users[user]?.token);

/** The change's answer, asked again while the failover makes Redis refuse (SERVICE_UNAVAILABLE changes nothing). */
async function answered(mutation: "likePost" | "unlikePost", post: string, user: number): Promise<boolean> {
  const response = await until(`${mutation} is answered`, async () => {
    const attempt = await change(mutation, post, user);
    return attempt.errors?.every((e) => e.extensions?.code === "SERVICE_UNAVAILABLE") ? null : attempt;
  });
  return (dataOf(response)[mutation] as Changed).changed;
}

const readoutOf = async (post: string, user: number) =>
  dataOf(
    await api.gql<{ post: { counts: { likes: number }; viewerHasLiked: boolean } }>(
      `query($id: ID!) { post(id: $id) { counts { likes } viewerHasLiked } }`,
      { id: post },
      users[user]?.token,
    ),
  ).post;

/** The posts the user's likedPosts lists, newest first. */
const likedOf = async (user: number) =>
  dataOf(
    await api.gql<{ user: { likedPosts: { edges: { node: { id: string } }[] } } }>(
      `query($id: ID!) { user(id: $id) { likedPosts(first: 10) { edges { node { id } } } } }`,
      { id: String(users[user]?.id) },
      users[user]?.token,
    ),
  ).user.likedPosts.edges.map((e) => e.node.id);

describe("a failover that lost acknowledged writes", () => {
  it("when the promoted replica lacks a like and an unlike PostgreSQL holds, then reads and changes answer from PostgreSQL's truth, none contradicting them", async () => {
    const post = dataOf(await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "f", body: "b") { id } }`, {}, users[author]?.token))
      .createPost.id;
    const target: LikeableTarget = { type: "post", id: BigInt(post) };
    const keys = createRedisKeys(api.config.redisPartitions);
    const [primary, replica] = [new Redis({ port: primaryPort }), new Redis({ port: replicaPort })];
    // The primary is killed: its client's reconnects are refused.
    primary.on("error", () => {});
    try {
      expect(await answered("likePost", post, first)).toBe(true);
      // The second user's member index, loaded by their read, complete on both: it will lack their like.
      expect(await readoutOf(post, second)).toEqual({ counts: { likes: 1 }, viewerHasLiked: false });
      const index = keys.memberIndex("like", "post", users[second]?.id ?? 0n);
      // And their list of liked posts, loaded by their read: it will lack the like too.
      expect(await likedOf(second)).toEqual([]);
      const list = keys.list("like", users[second]?.id ?? 0n);
      await until(
        "the replica holds the first like, the complete index and the list",
        async () => (await replicaLikes()) === 1 && (await replica.sismember(index, "0")) === 1 && (await replica.exists(list.horizon)) === 1,
      );

      // The replica hears nothing more: paused, and its link dropped so it cannot catch up on resuming.
      servers.pause(replicaPort);
      await primary.call("CLIENT", "KILL", "TYPE", "replica");
      expect(await answered("likePost", post, second)).toBe(true);
      expect(await answered("unlikePost", post, first)).toBe(true);
      await eventually(
        async () => (await databaseMembers(db, target, "like")).join(",") === String(users[second]?.id),
        20_000,
        async () => `PostgreSQL's likers: ${(await databaseMembers(db, target, "like")).join(",")}`,
      );

      servers.kill(primaryPort);
      servers.resume(replicaPort);
      await replica.replicaof("NO", "ONE");
      proxy.retarget(replicaPort);
      // What the promoted replica holds: the first user a liker, the second not.
      expect(await replicaLikes()).toBe(1);

      expect(await readoutOf(post, second)).toEqual({ counts: { likes: 1 }, viewerHasLiked: true });
      expect(await replica.zcard(list.entries)).toBe(0);
      expect(await likedOf(second)).toEqual([post]);
      expect(await answered("unlikePost", post, second)).toBe(true);
      expect(await answered("likePost", post, first)).toBe(true);
      expect(await readoutOf(post, first)).toEqual({ counts: { likes: 1 }, viewerHasLiked: true });
      await eventually(
        async () => (await databaseMembers(db, target, "like")).join(",") === String(users[first]?.id),
        20_000,
        async () => `PostgreSQL's likers: ${(await databaseMembers(db, target, "like")).join(",")}`,
      );
    } finally {
      primary.disconnect();
      replica.disconnect();
    }

    async function replicaLikes(): Promise<number> {
      return Number(await replica.hget(keys.counters(target), "like"));
    }
  });

  it("when a failover loses a like the relay never read, then the API process that acknowledged it appends it to PostgreSQL and nothing contradicts it", async () => {
    // The replica promoted by the test before is the primary now: it gets a replica of its own.
    const primaryNow = replicaPort;
    const nextReplica = await servers.start({ replicaOf: primaryNow });
    const post = dataOf(await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "g", body: "b") { id } }`, {}, users[author]?.token))
      .createPost.id;
    const [primary, replica] = [new Redis({ port: primaryNow }), new Redis({ port: nextReplica })];
    primary.on("error", () => {});
    try {
      const counters = createRedisKeys(api.config.redisPartitions).counters({ type: "post", id: BigInt(post) });
      await until("the replica holds the post", async () => (await replica.exists(counters)) === 1);
      const before = api.loads.histories();
      // Nothing relays the like: it is in the primary's outbox alone when the primary dies.
      await pipeline.stop();
      servers.pause(nextReplica);
      await primary.call("CLIENT", "KILL", "TYPE", "replica");
      expect(await answered("likePost", post, second)).toBe(true);
      servers.kill(primaryNow);
      servers.resume(nextReplica);
      await replica.replicaof("NO", "ONE");
      proxy.retarget(nextReplica);
      pipeline = await startTestPipeline(testConfig({ REDIS_URL: proxy.url }));

      // The connection that served closed with the primary: the like, in no other store, went to PostgreSQL.
      await eventually(
        async () => api.loads.histories().appendedAcknowledged === before.appendedAcknowledged + 1,
        15_000,
        () => `appended acknowledged changes: ${api.loads.histories().appendedAcknowledged - before.appendedAcknowledged}`,
      );
      // The post is suspect on the promoted replica, which lacks the like: reads answer from PostgreSQL, and a
      // repeat of the like waits for the failover to settle, finds PostgreSQL ahead and loads the post again.
      expect(await readoutOf(post, second)).toEqual({ counts: { likes: 1 }, viewerHasLiked: true });
      expect(await answered("likePost", post, second)).toBe(false);
      expect(await readoutOf(post, first)).toEqual({ counts: { likes: 1 }, viewerHasLiked: false });
      expect(await replica.hget(counters, "like")).toBe("1");
      expect(api.loads.histories().lostAcknowledged).toBe(before.lostAcknowledged);
    } finally {
      primary.disconnect();
      replica.disconnect();
    }
  });
});
