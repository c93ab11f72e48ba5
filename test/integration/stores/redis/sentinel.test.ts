// Redis under Sentinel: a primary, a replica and three Sentinels of the test's own
// (redis-server --sentinel), the service configured with REDIS_SENTINELS only. It
// finds the primary through them, after a failover to the replica it likes and reads on
// the new primary, with what the old one held, and once closed it leaves no connection
// on the Sentinels.
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSentinels, type Sentinels } from "../../../../scripts/lib/sentinels.js";
import { createRedisKeys } from "../../../../src/stores/redis/keys.js";
import { startTestApi, type TestApi } from "../../../support/api.js";
import { createUsers, dataOf, openDatabase } from "../../../support/env.js";
import { redisServers, until } from "../../../support/redis-servers.js";

const name = "likes-test";
const servers = redisServers();
const dir = servers.dir;

let primaryPort: number;
let replicaPort: number;
let sentinelPorts: number[];
let sentinel: Redis;
let sentinels: Sentinels | undefined;

beforeAll(async () => {
  primaryPort = await servers.start();
  replicaPort = await servers.start({ replicaOf: primaryPort });
  sentinels = await startSentinels(dir, name, primaryPort);
  sentinelPorts = [...sentinels.ports];
  sentinel = new Redis({ port: sentinelPorts[0], lazyConnect: true });
  // Refused until the Sentinel listens: asked again.
  sentinel.on("error", () => {});
  await until("the Sentinels know the replica", async () => ((await sentinel.call("SENTINEL", "REPLICAS", name)) as unknown[]).length > 0);
}, 60_000);

afterAll(() => {
  sentinel?.disconnect();
  sentinels?.stop();
  servers.stop();
});

/**
 * The connections of clients other than Sentinels and this file's own, on each Sentinel: Sentinels
 * name theirs (sentinel-…), and the service's are unnamed.
 */
async function clientsOfSentinels(): Promise<number> {
  let clients = 0;
  const watching = String(await sentinel.client("ID"));
  for (const port of sentinelPorts) {
    const asking = new Redis({ port, lazyConnect: true });
    try {
      const own = String(await asking.client("ID"));
      const list = String(await asking.client("LIST"));
      const others = list.split("\n").filter((line) => line.startsWith("id=") && / name= /.test(line));
      clients += others.filter((line) => !line.startsWith(`id=${own} `) && !(port === sentinelPorts[0] && line.startsWith(`id=${watching} `))).length;
    } finally {
      asking.disconnect();
    }
  }
  return clients;
}

describe("Redis under Sentinel", () => {
  let api: TestApi;
  afterAll(async () => {
    await api?.close();
  });

  it("when the service closes, then it leaves no connection to the Sentinels open", async () => {
    const closing = await startTestApi({ REDIS_SENTINELS: sentinelPorts.map((port) => `127.0.0.1:${port}`).join(","), REDIS_SENTINEL_NAME: name });
    expect(dataOf(await closing.gql<{ __typename: string }>(`{ __typename }`)).__typename).toBe("Query");
    // Its failover detector watches every Sentinel (ioredis's failoverDetector), on connections that outlive a QUIT.
    expect(await clientsOfSentinels()).toBeGreaterThan(0);
    await closing.close();
    await until("no connection of the service is left on the Sentinels", async () => (await clientsOfSentinels()) === 0, 10_000);
  });

  it("when the Sentinels fail the primary over to its replica, then likes go on on the new primary, which holds the likes made before", async () => {
    api = await startTestApi({ REDIS_SENTINELS: sentinelPorts.map((port) => `127.0.0.1:${port}`).join(","), REDIS_SENTINEL_NAME: name });
    // A listener of counter writes still on the demoted primary would leave counts in memory stale: none are kept.
    expect(api.hotCounts).toBeNull();
    const db = openDatabase(api.config);
    try {
      const [author, first, second] = await createUsers(db, api.config, 3);
      const post = dataOf(await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "s", body: "b") { id } }`, {}, author?.token)).createPost
        .id;
      const like = (token: string | undefined) =>
        api.gql<{ likePost: { changed: boolean } }>(`mutation($id: ID!) { likePost(postId: $id) { changed } }`, { id: post }, token);
      expect(dataOf(await like(first?.token)).likePost.changed).toBe(true);
      const primary = new Redis({ port: primaryPort, lazyConnect: true });
      expect(await primary.dbsize()).toBeGreaterThan(0);
      primary.disconnect();
      // SENTINEL FAILOVER does not wait for the replica: the test does, so that this failover loses nothing.
      const replica = new Redis({ port: replicaPort, lazyConnect: true });
      const counters = createRedisKeys(api.config.redisPartitions).counters({ type: "post", id: BigInt(post) });
      await until("the replica holds the like", async () => (await replica.hget(counters, "like")) === "1");
      replica.disconnect();

      await sentinel.call("SENTINEL", "FAILOVER", name);
      await until(
        "the Sentinels name the replica",
        async () => ((await sentinel.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)) as string[])[1] === String(replicaPort),
      );
      // The old primary follows the new one: from then on no write lands where a resync would drop it.
      const old = new Redis({ port: primaryPort, lazyConnect: true });
      await until("the old primary follows the new one", async () => (await old.info("replication")).includes("master_link_status:up"));
      old.disconnect();
      // Requests around the switch may be refused (SERVICE_UNAVAILABLE); the next ones land on the new primary.
      const answer = await until("a like is taken after the failover", async () => {
        const response = await like(second?.token);
        return response.errors ? null : response;
      });
      expect(dataOf(answer).likePost.changed).toBe(true);
      const counts = dataOf(
        await api.gql<{ post: { counts: { likes: number }; viewerHasLiked: boolean } }>(
          `query($id: ID!) { post(id: $id) { counts { likes } viewerHasLiked } }`,
          { id: post },
          first?.token,
        ),
      );
      expect(counts.post).toEqual({ counts: { likes: 2 }, viewerHasLiked: true });
      const promoted = new Redis({ port: replicaPort, lazyConnect: true });
      expect(await promoted.info("replication")).toContain("role:master");
      promoted.disconnect();
    } finally {
      await db.$disconnect();
    }
  }, 60_000);
});
