// Likes while the slot of their post moves between masters of the suite's local
// Redis Cluster, the way `redis-cli --cluster reshard` moves it (CLUSTER SETSLOT
// IMPORTING and MIGRATING, MIGRATE key by key, SETSLOT NODE): each like applies,
// or fails as an unavailability the caller may retry, and none is lost or doubled.
// The moved post arrives on a node of another replication history: the service's
// load adopts it as it is, PostgreSQL holding nothing newer (domain/target-loads.ts).
import type { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LikeableTarget } from "../../../../src/domain/model/index.js";
import { isRedisUnavailable } from "../../../../src/stores/redis/client.js";
import { createCounterStore } from "../../../../src/stores/redis/counter-store.js";
import { createRedisKeys, type RedisKeys } from "../../../../src/stores/redis/keys.js";
import { createMembershipStore } from "../../../../src/stores/redis/membership-store.js";
import { createRebuildStore } from "../../../../src/stores/redis/rebuild-store.js";
import { createTargetLoader } from "../../../../src/domain/target-loads.js";
import { createSnapshotStore } from "../../../../src/stores/postgres/snapshot-store.js";
import { masters, migrate, openClusterClients, ownerOf, type ClusterClients, type Master } from "../../../support/cluster.js";

let clients: ClusterClients;
let cluster: Cluster;
let keys: RedisKeys;

beforeAll(async () => {
  clients = await openClusterClients();
  cluster = clients.cluster;
  keys = createRedisKeys(clients.config.redisPartitions);
});
afterAll(async () => {
  await clients.close();
});

describe("a slot migrating between masters", () => {
  it("when a post's slot migrates while users like it, then each like applies or fails as unavailable, and retried, every like counts once", async () => {
    const target: LikeableTarget = { type: "post", id: BigInt(Date.now()) * 1000n + 7n };
    const counters = createCounterStore(cluster, keys);
    const store = createMembershipStore(cluster, keys);
    const loader = createTargetLoader({
      rebuildStore: createRebuildStore(cluster, keys),
      snapshots: createSnapshotStore(clients.db),
      counterStore: counters,
      lookup: async (targets) => targets.map(() => ({ authorId: null })),
    });
    // A like as the membership service makes it: a target its node does not answer for is loaded first.
    const likes = {
      add: async (relation: "like", t: LikeableTarget, user: bigint) => {
        const first = await store.add(relation, t, user);
        if (first.kind !== "unloaded") return first;
        expect(await loader.load([t])).toEqual(["held"]);
        return store.add(relation, t, user);
      },
      holds: (relation: "like", targets: readonly LikeableTarget[], user: bigint) => store.holds(relation, targets, user),
    };
    await counters.init(target, { like: 0 }, 1n);
    const users = Array.from({ length: 400 }, (_, i) => BigInt(i + 1));
    // Keys in the slot besides the counters: a migration takes a while, and likes pass through every stage of it.
    for (const user of users.slice(0, 20)) expect(await likes.add("like", target, user)).toMatchObject({ changed: true });

    const slot = Number(await cluster.cluster("KEYSLOT", keys.counters(target)));
    const all = await masters(cluster);
    const source = await ownerOf(cluster, slot, all);
    const destination = all.find((m) => m !== source) as Master;
    const failed: bigint[] = [];
    const applied: bigint[] = [];
    const faults: unknown[] = [];
    let migrating = true;
    const liking = (async () => {
      for (const user of users.slice(20)) {
        try {
          expect(await likes.add("like", target, user)).toMatchObject({ changed: true });
          applied.push(user);
        } catch (error) {
          failed.push(user);
          faults.push(error);
        }
        if (!migrating) break;
      }
    })();
    try {
      expect(await migrate(slot, source, destination, all, 150)).toBeGreaterThan(3);
    } finally {
      migrating = false;
      await liking;
    }
    expect(faults.filter((f) => !isRedisUnavailable(f))).toEqual([]);
    // Retried once the slot settled: a like that failed had not applied, or had before it failed.
    const untried = users.slice(20).filter((u) => !failed.includes(u) && !applied.includes(u));
    for (const user of [...failed, ...untried]) expect((await likes.add("like", target, user)).kind).toBe("applied");
    expect((await counters.read([target]))[0]?.like).toBe(users.length);
    expect((await likes.holds("like", [target], 400n))[0]).toBe(true);
    // Adopted whole on its new node, never loaded again from PostgreSQL (which holds none of these likes).
    expect(loader.histories().reloaded).toBe(0);
    expect(loader.histories().adopted).toBeGreaterThanOrEqual(1);

    // The slot goes back where it was: other files expect the layout redis-cluster.sh made.
    await migrate(slot, destination, source, all, 0);
    expect((await ownerOf(cluster, slot, all)).id).toBe(source.id);
    expect((await counters.read([target]))[0]?.like).toBe(users.length);
  });
});
