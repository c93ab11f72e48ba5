// REDIS_REPLICA_ACKS=1 against a primary and a replica of the test's own: a like
// is answered only once the replica holds it; with the replica paused (SIGSTOP)
// it answers SERVICE_UNAVAILABLE by its deadline, saying the change may be made,
// and the change stays on the primary: repeating it once the replica is back
// answers that it held. On the suite's cluster, whose masters have no replica, a
// write's WAIT goes to the write's node and reports none.
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCounterStore } from "../../../../src/stores/redis/counter-store.js";
import { createRedisKeys } from "../../../../src/stores/redis/keys.js";
import { createMembershipStore } from "../../../../src/stores/redis/membership-store.js";
import { replicaAckConnections, ReplicasBehindError } from "../../../../src/stores/redis/replica-acks.js";
import { masters, migrate, openClusterClients, ownerOf, type Master } from "../../../support/cluster.js";
import { startTestApi, type TestApi } from "../../../support/api.js";
import { createUsers, dataOf, openDatabase, type TestUser } from "../../../support/env.js";
import { redisServers } from "../../../support/redis-servers.js";

const servers = redisServers();
let replicaPort: number;
let primary: Redis;
let replica: Redis;
let api: TestApi;
let users: TestUser[];

beforeAll(async () => {
  const primaryPort = await servers.start();
  replicaPort = await servers.start({ replicaOf: primaryPort });
  [primary, replica] = [new Redis({ port: primaryPort }), new Redis({ port: replicaPort })];
  api = await startTestApi({ REDIS_URL: `redis://127.0.0.1:${primaryPort}`, REDIS_REPLICA_ACKS: "1" });
  const db = openDatabase(api.config);
  try {
    users = await createUsers(db, api.config, 3);
  } finally {
    await db.$disconnect();
  }
}, 30_000);

afterAll(async () => {
  await api?.close();
  primary?.disconnect();
  replica?.disconnect();
  servers.stop();
});

const keys = createRedisKeys(1024);
const [author, first, second] = [0, 1, 2];

async function newPost(): Promise<string> {
  const created = await api.gql<{ createPost: { id: string } }>(`mutation { createPost(title: "r", body: "b") { id } }`, {}, users[author]?.token);
  return dataOf(created).createPost.id;
}

const like = (post: string, user: number) =>
  api.gql<{ likePost: { changed: boolean } }>(`mutation($id: ID!) { likePost(postId: $id) { changed } }`, { id: post }, users[user]?.token);

/** The like count a server holds for the post, as the counter hash says. */
const likesOn = async (server: Redis, post: string) => Number((await server.hget(keys.counters({ type: "post", id: BigInt(post) }), "like")) ?? 0);

describe("replica acks (REDIS_REPLICA_ACKS=1)", () => {
  it("when the replica is in sync, then a like is answered once the replica holds it", async () => {
    const post = await newPost();
    expect(dataOf(await like(post, first)).likePost.changed).toBe(true);
    // Asked at once, with no wait: the answer came after the replica's acknowledgement.
    expect(await likesOn(replica, post)).toBe(1);
  });

  it("when the replica is paused, then a like answers SERVICE_UNAVAILABLE saying the change may be made; it stays made, and its repeat says so once the replica is back", async () => {
    const post = await newPost();
    servers.pause(replicaPort);
    try {
      const refused = await like(post, second);
      expect(refused.errors?.[0]?.extensions?.code).toBe("SERVICE_UNAVAILABLE");
      expect(refused.errors?.[0]?.message).toMatch(/did not confirm in time that 1 replica\(s\) hold this change \(0 did\).*may have been made on the primary/);
      // Not undone: the primary holds it.
      expect(await likesOn(primary, post)).toBe(1);
    } finally {
      servers.resume(replicaPort);
    }
    expect(dataOf(await like(post, second)).likePost.changed).toBe(false);
    expect(await likesOn(replica, post)).toBe(1);
  });
});

describe("replica acks on a Redis Cluster", () => {
  it("when a master has no replica, then a like is refused by its deadline with the count confirmed, and stays made on the master", async () => {
    const clients = await openClusterClients({ REDIS_REPLICA_ACKS: "1" });
    try {
      const target = { type: "post", id: BigInt(Date.now()) * 1000n } as const;
      await createCounterStore(clients.redis, keys).init(target, { like: 0 }, 1n);
      const refused = await createMembershipStore(clients.redis, keys)
        .add("like", target, 7n, Date.now() + 1_000)
        .catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(ReplicasBehindError);
      expect(refused).toMatchObject({ replicas: 1, confirmed: 0 });
      expect(await clients.cluster.hget(keys.counters(target), "like")).toBe("1");
    } finally {
      await clients.close();
    }
  });

  it("when a target's slot moved to another master since the writers learnt the map (as after a failover), then its like follows it there", async () => {
    const clients = await openClusterClients({ REDIS_REPLICA_ACKS: "1" });
    const { cluster } = clients;
    try {
      const target = { type: "post", id: BigInt(Date.now()) * 1000n + 3n } as const;
      const store = createMembershipStore(clients.redis, keys);
      await createCounterStore(clients.redis, keys).init(target, { like: 0 }, 1n);
      // A first like: the writers learn which master serves the slot.
      await expect(store.add("like", target, 7n, Date.now() + 1_000)).rejects.toBeInstanceOf(ReplicasBehindError);
      const slot = Number(await cluster.cluster("KEYSLOT", keys.counters(target)));
      const all = await masters(cluster);
      const source = await ownerOf(cluster, slot, all);
      const destination = all.find((m) => m !== source) as Master;
      await migrate(slot, source, destination, all, 0);
      try {
        // The old master refuses the script (MOVED) and, a master here, holds its WAIT until the deadline is near
        // (a demoted one refuses it at once): each writer connection learns the map then, and sends again if time is left.
        await Promise.all(
          Array.from({ length: replicaAckConnections }, (_, i) => store.add("like", target, 100n + BigInt(i), Date.now() + 1_000).catch(() => undefined)),
        );
        // The next like goes to the new master at once: its script runs there (a MOVED would be thrown as it
        // came), and it is refused only for want of replicas. (It changes nothing: the target, of another
        // replication history there, is loaded before a change, which the membership service does.)
        const refused = await store.add("like", target, 9n, Date.now() + 1_000).catch((error: unknown) => error);
        expect(refused).toMatchObject({ replicas: 1, confirmed: 0 });
      } finally {
        // Back where it was: other files expect the layout redis-cluster.sh made.
        await migrate(slot, destination, source, all, 0);
      }
    } finally {
      await clients.close();
    }
  });
});
