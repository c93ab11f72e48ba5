// Every script against a real 3-master Redis Cluster (scripts/redis-cluster.sh), through the
// clients the service opens in cluster mode (auto-pipelining on) and the stores built on them.
import type { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bucketedWindowNames,
  counterNames,
  bucketStart,
  bucketSpans,
  windowBuckets,
  windowOfSpan,
  type BucketCount,
  type LikeableTarget,
  type MalformedOutboxEntry,
  type OutboxEntry,
  type Target,
} from "../../../../src/domain/model/index.js";
import type { ReadoutRequest } from "../../../../src/domain/ports/index.js";
import { createCountChanges } from "../../../../src/stores/redis/count-changes.js";
import { createCounterStore } from "../../../../src/stores/redis/counter-store.js";
import { decodeTargetLines } from "../../../../src/stores/redis/target-reader.js";
import { parseCounterHash } from "../../../../src/stores/redis/counter-hash.js";
import { createRedisClient } from "../../../../src/stores/redis/client.js";
import { createRedisKeys, type RedisKeys } from "../../../../src/stores/redis/keys.js";
import { createLease } from "../../../../src/stores/redis/lease-store.js";
import { createListStore } from "../../../../src/stores/redis/list-store.js";
import { createMembershipStore } from "../../../../src/stores/redis/membership-store.js";
import { createOutboxStore } from "../../../../src/stores/redis/outbox-store.js";
import { versionOf } from "../../../../src/stores/versions.js";
import { createRankingStore } from "../../../../src/stores/redis/ranking-store.js";
import { createRateBudgetStore } from "../../../../src/stores/redis/rate-budget-store.js";
import { createRebuildStore } from "../../../../src/stores/redis/rebuild-store.js";
import { createRedisReconcileStore } from "../../../../src/stores/redis/redis-reconcile-store.js";
import { relationLayouts } from "../../../../src/stores/redis/relations.js";
import { createViewStore } from "../../../../src/stores/redis/view-store.js";
import { scriptFiles, standaloneOnlyScripts } from "../../../../src/stores/redis/scripts.js";
import { ScriptStatus } from "../../../../src/stores/redis/statuses.js";
import { emptyCluster, openClusterClients, scriptFileNames, scriptsRun, type ClusterClients } from "../../../support/cluster.js";

let clients: ClusterClients;
let cluster: Cluster;
let keys: RedisKeys;
let nextBase = BigInt(Date.now()) * 1000n;
/** `count` targets with consecutive ids: consecutive partitions, so they spread over all three masters. */
const spread = <T extends Target["type"] = "post">(count: number, type: T = "post" as T): (Target & { type: T })[] => {
  const base = nextBase;
  nextBase += 10_000n;
  return Array.from({ length: count }, (_, i) => ({ type, id: base + BigInt(i) }));
};
const masterOf = (slot: number) => (slot <= 5460 ? 0 : slot <= 10922 ? 1 : 2);
const mastersOf = async (targets: readonly Target[]) =>
  new Set((await Promise.all(targets.map((t) => cluster.cluster("KEYSLOT", keys.counters(t))))).map(masterOf));

const targets: LikeableTarget[] = Array.from({ length: 24 }, (_, i) => ({ type: i % 2 ? "comment" : "post", id: nextBase + BigInt(i) }));
nextBase += 10_000n;

beforeAll(async () => {
  clients = await openClusterClients();
  cluster = clients.cluster;
  keys = createRedisKeys(clients.config.redisPartitions);
  await emptyCluster(cluster);
});
afterAll(async () => {
  await clients.close();
});

describe("scripts on a Redis Cluster", () => {
  it("when keys are built for a target and user, then they all hash to one slot, whatever the relation", async () => {
    for (const target of [...targets, ...spread(6, "user")]) {
      const relationKeys = (["like", "collect", "follow"] as const).flatMap((r) => [keys.touched(target, r), ...keys.memberShards(r, target, 12345n)]);
      const slots = await Promise.all(
        [keys.counters(target), keys.outbox(target), keys.receipt(target), keys.rebuildLock(target), keys.viewsReplayed(target), ...relationKeys].map((k) =>
          cluster.cluster("KEYSLOT", k),
        ),
      );
      expect(new Set(slots).size).toBe(1);
    }
    for (const user of spread(6, "user")) {
      const listKeys = (["like", "collect"] as const).flatMap((r) => Object.values(keys.list(r, user.id)));
      const slots = await Promise.all([keys.counters(user), ...listKeys].map((k) => cluster.cluster("KEYSLOT", k)));
      expect(new Set(slots).size).toBe(1);
    }
    expect((await mastersOf(targets)).size).toBe(3);
  });

  it("when targets on every master are initialised, liked, unliked, collected and mirrored, then counts are exact", async () => {
    const counters = createCounterStore(cluster, keys);
    const memberships = createMembershipStore(cluster, keys, 16);
    for (const t of targets) expect(await counters.init(t, { like: 0 }, 9n)).toBe(true);
    expect(await counters.init(targets[0] as LikeableTarget, { like: 5 })).toBe(false);

    const posts = targets.filter((t) => t.type === "post");
    await Promise.all(targets.flatMap((t) => Array.from({ length: 60 }, (_, u) => memberships.add("like", t, BigInt(u + 1)))));
    await Promise.all(targets.flatMap((t) => Array.from({ length: 20 }, (_, u) => memberships.remove("like", t, BigInt(u + 1)))));
    await Promise.all(posts.flatMap((t) => Array.from({ length: 30 }, (_, u) => memberships.add("collect", t, BigInt(u + 1)))));
    await counters.mirror(
      targets.flatMap((t) => [
        { target: t, name: "reply" as const, value: 2, seq: 5n },
        { target: t, name: "reply" as const, value: 9, seq: 4n },
      ]),
    );

    const outboxLength = (await Promise.all(targets.map((t) => cluster.xlen(keys.outbox(t))))).reduce((a, b) => a + b, 0);
    expect(outboxLength).toBeGreaterThanOrEqual(targets.length * 80 + posts.length * 30);
    const counts = await counters.read(targets);
    for (const [i, c] of counts.entries()) {
      const target = targets[i] as LikeableTarget;
      expect(c?.like).toBe(40);
      expect(c?.reply).toBe(2);
      if (target.type === "post") expect(c?.collect).toBe(30);
      expect(parseCounterHash(await cluster.hgetall(keys.counters(target))).generations.like).toBeGreaterThan(0);
    }
    expect((await memberships.holds("like", targets, 30n)).every(Boolean)).toBe(true);
    expect((await memberships.holds("like", targets, 3n)).some(Boolean)).toBe(false);
    expect((await memberships.holds("collect", posts, 3n)).every(Boolean)).toBe(true);
    const views = await counters.readout(posts, { names: ["like", "collect"], relations: ["like", "collect"], viewerId: 30n });
    expect(views.every((v) => v?.viewerIn.like === true && v.viewerIn.collect === true && v.counts.like === 40 && v.counts.collect === 30)).toBe(true);
    const notCollected = await counters.readout(posts, { names: ["collect"], relations: ["like", "collect"], viewerId: 45n });
    expect(notCollected.every((v) => v?.viewerIn.like === true && v.viewerIn.collect === false)).toBe(true);
  });

  it("when posts on every master are liked, viewed and mirrored, then a sharded subscriber hears each change of the posts it listens to, and none of those it ignored", async () => {
    const counters = createCounterStore(cluster, keys);
    const memberships = createMembershipStore(cluster, keys, 16);
    const views = createViewStore(cluster, keys);
    const posts = spread(9);
    expect(await mastersOf(posts)).toEqual(new Set([0, 1, 2]));
    await Promise.all(posts.map((t) => counters.init(t, { like: 0 })));
    const subscriber = createRedisClient({ url: "redis://unused", clusterNodes: clients.config.redisClusterNodes, subscriber: true });
    await subscriber.connect();
    try {
      const changes = createCountChanges(subscriber, keys);
      const heard: string[] = [];
      changes.onChange((target) => heard.push(target ? `${target.type}:${target.id}` : "resync"));
      await changes.listen(posts);
      const [ignored, ...listened] = posts as [Target, ...Target[]];
      await changes.ignore([ignored]);
      await Promise.all(posts.map((t) => memberships.add("like", t, 7n)));
      await Promise.all(posts.map((t) => views.add(t, 3, { sender: "cluster-test", seq: 1 })));
      await counters.mirror(posts.map((t) => ({ target: t, name: "comment" as const, value: 4, seq: 1n })));
      const expected = listened.flatMap((t) => Array.from({ length: 3 }, () => `post:${t.id}`)).sort();
      for (let i = 0; i < 50 && heard.filter((h) => h !== "resync").length < expected.length; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(heard.filter((h) => h !== "resync").sort()).toEqual(expected);
    } finally {
      subscriber.disconnect();
    }
  });

  it("when users on every master are followed and unfollowed, then followers count and each follower is found", async () => {
    const counters = createCounterStore(cluster, keys);
    const memberships = createMembershipStore(cluster, keys, 8);
    const users = spread(12, "user");
    expect((await mastersOf(users)).size).toBe(3);
    await Promise.all(users.map((u) => counters.init(u, { followers: 0 })));
    await Promise.all(users.flatMap((u) => Array.from({ length: 40 }, (_, f) => memberships.add("follow", u, BigInt(f + 1)))));
    await Promise.all(users.flatMap((u) => Array.from({ length: 10 }, (_, f) => memberships.remove("follow", u, BigInt(f + 1)))));
    expect((await counters.read(users)).map((c) => c?.followers)).toEqual(users.map(() => 30));
    const views = await counters.readout(users, { names: ["followers"], relations: ["follow"], viewerId: 25n });
    expect(views.every((v) => v?.viewerIn.follow === true)).toBe(true);
    expect((await memberships.holds("follow", users, 5n)).some(Boolean)).toBe(false);
  });

  it("when views of posts on every master are recorded and replayed into a rebuilt post, then each is counted once", async () => {
    const counters = createCounterStore(cluster, keys);
    const viewsOf = createViewStore(cluster, keys);
    const rebuilds = createRebuildStore(cluster, keys);
    const group = spread(12);
    await Promise.all(group.map((t) => counters.init(t, { like: 0 })));
    for (let round = 0; round < 3; round++) {
      expect((await Promise.all(group.map((t) => viewsOf.add(t, 5, { sender: "cluster-test", seq: round + 1 })))).every((r) => r.kind === "counted")).toBe(
        true,
      );
    }
    // A retried flush (same number) counts once.
    await Promise.all(group.map((t) => viewsOf.add(t, 5, { sender: "cluster-test", seq: 3 })));
    expect((await counters.read(group)).map((c) => c?.read)).toEqual(group.map(() => 15));
    expect(await viewsOf.add(spread(1)[0] as Target, 1, { sender: "cluster-test", seq: 1 })).toEqual({ kind: "unloaded" });

    // Rebuilt in epoch 4 from a snapshot that held 10 of epoch 3's views; 14 of them reached PostgreSQL late.
    await Promise.all(group.map((t) => rebuilds.drop(t)));
    await Promise.all(
      group.map(async (t) =>
        rebuilds.write(
          t,
          { members: {}, counts: { read: 10 }, seqs: {}, viewTotals: [{ epoch: 3n, total: 10 }], version: 0n, epoch: 4n, mark: "100:100:" },
          8n,
          (await rebuilds.lock(t, 10_000)) as string,
        ),
      ),
    );
    const late = { epoch: 3n, total: 14, intoEpoch: 4n };
    expect(await Promise.all(group.map((t) => rebuilds.replayViews({ target: t, ...late })))).toEqual(group.map(() => "replayed"));
    expect(await Promise.all(group.map((t) => rebuilds.replayViews({ target: t, ...late })))).toEqual(group.map(() => "unchanged"));
    expect((await counters.read(group)).map((c) => c?.read)).toEqual(group.map(() => 14));
  });

  it("when users' lists on every master are changed, loaded and read, then each list holds its own newest entries", async () => {
    const lists = createListStore(cluster, keys);
    const users = spread(12, "user");
    const at = (ms: number) => new Date(1_795_000_000_000 + ms);
    // Changes from the API before the list is held: only their records move.
    expect(await Promise.all(users.map((u) => lists.apply("like", u.id, [{ targetId: 7n, member: true, version: 50n, at: at(50) }], false)))).toEqual(
      users.map(() => false),
    );
    for (const u of users) {
      const token = await lists.lock("like", u.id, 10_000);
      expect(token).not.toBeNull();
      await lists.begin("like", u.id);
      await lists.finish(
        "like",
        u.id,
        [
          { targetId: 5n, at: at(20) },
          { targetId: 4n, at: at(10) },
        ],
        { targetId: 3n, at: at(5) },
      );
      await lists.unlock("like", u.id, token as string);
    }
    await Promise.all(users.map((u) => lists.apply("like", u.id, [{ targetId: 5n, member: false, version: 60n, at: at(60) }], true)));
    const read = await Promise.all(users.map((u) => lists.read("like", u.id)));
    for (const list of read) {
      expect(list?.entries.map((e) => e.targetId)).toEqual([7n, 4n]);
      expect(list?.horizon).toEqual({ targetId: 3n, at: at(5) });
      expect(list?.recent).toEqual(
        new Map([
          [7n, { member: true, at: at(50) }],
          [5n, { member: false, at: at(60) }],
        ]),
      );
    }
  });

  it("when a target is unknown, then membership changes report it and a mirror leaves it missing", async () => {
    const [unknown] = spread(1) as [LikeableTarget];
    expect(await createMembershipStore(cluster, keys).add("like", unknown, 1n)).toEqual({ kind: "unloaded" });
    expect(await createMembershipStore(cluster, keys).remove("collect", unknown, 1n)).toEqual({ kind: "unloaded" });
    await createCounterStore(cluster, keys).mirror([{ target: unknown, name: "comment", value: 1, seq: 1n }]);
    expect(await cluster.exists(keys.counters(unknown))).toBe(0);
  });

  it("when a script is given keys of two slots, then it is refused", async () => {
    const [a, b] = [targets[0] as LikeableTarget, targets[1] as LikeableTarget];
    const { tag, generationField } = relationLayouts.like;
    await expect(
      cluster.addMember(
        keys.counters(a),
        keys.outbox(a),
        keys.touched(a, "like"),
        keys.receipt(a),
        ...keys.memberShards("like", b, 1n),
        "1",
        512,
        "like",
        "post",
        a.id.toString(),
        tag,
        generationField,
        ...counterNames.post,
      ),
    ).rejects.toThrow(/CROSSSLOT|same slot/);
  });

  it("when evictions, recounts and likes of targets on every master leave at once, then each reaches its target's node", async () => {
    // Grown targets (capacity 2) take more membership shards, so the scripts get varying key counts.
    const likes = createMembershipStore(cluster, keys, 2);
    const counters = createCounterStore(cluster, keys);
    const rebuilds = createRebuildStore(cluster, keys, 2);
    const reconcile = createRedisReconcileStore(cluster, keys);
    const [drifted, cold, liked] = [spread(24), spread(24), spread(24)];
    expect((await mastersOf(drifted)).size).toBe(3);
    await Promise.all([...drifted, ...cold, ...liked].map((t) => counters.init(t, { like: 0 })));
    await Promise.all(drifted.flatMap((t) => [1n, 2n, 3n, 4n, 5n].map((u) => likes.add("like", t, u))));
    // A drifted count: set behind the script's back, as a bug or a partial loss would.
    await Promise.all(drifted.map((t) => cluster.hincrby(keys.counters(t), "like", 7)));
    const items = drifted.map((target) => ({ relation: "like" as const, target }));
    const seen = await reconcile.inspect(items);
    expect(seen.every((s) => s !== null && s.members.length === 5 && s.count === 12 && s.version > 0n)).toBe(true);

    const [recounts, evictions, likeResults] = await Promise.all([
      Promise.all(items.map((item, i) => reconcile.recount(item, seen[i]?.version ?? 0n))),
      Promise.all(cold.map((t) => rebuilds.evict(t, 0n))),
      Promise.all(liked.map((t) => likes.add("like", t, 9n))),
    ]);

    expect(recounts).toEqual(drifted.map(() => "recounted"));
    expect(evictions).toEqual(cold.map(() => "evicted"));
    expect(likeResults.every((r) => r.kind === "applied" && r.changed)).toBe(true);
    expect((await counters.read(drifted)).map((c) => c?.like)).toEqual(drifted.map(() => 5));
    expect(await reconcile.holds(cold)).toEqual(cold.map(() => false));
  });

  it("when targets are rebuilt, replayed, evicted and rebuilt again on every master, then each comes back whole", async () => {
    const rebuilds = createRebuildStore(cluster, keys, 2);
    const likes = createMembershipStore(cluster, keys, 2);
    const reconcile = createRedisReconcileStore(cluster, keys);
    const group = spread(12);
    const members = [11n, 12n, 13n, 14n, 15n, 16n, 17n];

    const tokens = await Promise.all(group.map((t) => rebuilds.lock(t, 10_000)));
    expect(tokens.every((token) => token !== null)).toBe(true);
    expect(await Promise.all(group.map((t) => rebuilds.lock(t, 10_000)))).toEqual(group.map(() => null));
    const snapshot = {
      members: { like: members, collect: [11n] },
      counts: { comment: 3 },
      seqs: { comment: 2n },
      viewTotals: [],
      version: 50n,
      epoch: 2n,
      mark: "100:100:",
    };
    expect(await Promise.all(group.map((t, i) => rebuilds.write(t, snapshot, 8n, tokens[i] as string)))).toEqual(group.map(() => "written"));
    await Promise.all(group.map((t, i) => rebuilds.unlock(t, tokens[i] as string)));
    const again = await Promise.all(group.map((t) => rebuilds.lock(t, 10_000)));
    expect(again.every((token) => token !== null)).toBe(true);

    const epochStarts = (await rebuilds.rebuilds(group)).map((r) => r?.rebuild?.epochStart);
    expect(epochStarts).toEqual(group.map(() => versionOf(2n, 0n)));
    // A late change made before the rebuild: user 18 liked, PostgreSQL applied it after the snapshot.
    const replayed = await Promise.all(
      group.map((t, i) =>
        rebuilds.replay({ relation: "like", target: t, userId: 18n, member: true, version: (epochStarts[i] as bigint) - 1_000n, intoEpoch: 2n }),
      ),
    );
    expect(replayed).toEqual(group.map(() => "replayed"));
    expect((await likes.holds("like", group, 18n)).every(Boolean)).toBe(true);

    const seen = await reconcile.inspect(group.map((target) => ({ relation: "like" as const, target })));
    expect(seen.map((s) => s?.count)).toEqual(group.map(() => members.length + 1));
    expect(seen.every((s) => s !== null && s.members.length === members.length + 1)).toBe(true);
    expect((await reconcile.inspect(group.map((target) => ({ relation: "collect" as const, target })))).map((s) => s?.members)).toEqual(group.map(() => [11n]));
    // Grown past generation 0, so eviction passes the shards of two generations.
    const generations = await Promise.all(group.map(async (t) => parseCounterHash(await cluster.hgetall(keys.counters(t))).generations.like));
    expect(generations.every((g) => g >= 1)).toBe(true);
    const evicted = await Promise.all(group.map((t, i) => rebuilds.evict(t, seen[i]?.version ?? 0n)));
    expect(evicted).toEqual(group.map(() => "evicted"));
    expect(await reconcile.holds(group)).toEqual(group.map(() => false));
    expect(await Promise.all(group.map((t) => rebuilds.evict(t, 0n)))).toEqual(group.map(() => "absent"));

    expect(await Promise.all(group.map((t, i) => rebuilds.write(t, { ...snapshot, version: 60n, epoch: 3n }, 8n, again[i] as string)))).toEqual(
      group.map(() => "written"),
    );
    expect((await createCounterStore(cluster, keys).read(group)).map((c) => c?.like)).toEqual(group.map(() => members.length));
  });

  it("when a reconcile pass walks the cluster, then it finds targets of every master and recounts one that drifted", async () => {
    const reconcile = createRedisReconcileStore(cluster, keys);
    const counters = createCounterStore(cluster, keys);
    const likes = createMembershipStore(cluster, keys);
    const group = spread(9);
    await Promise.all(group.map((t) => counters.init(t, { like: 0 })));
    await Promise.all(group.map((t) => likes.add("like", t, 21n)));

    const found = new Set<string>();
    let cursor: string | null = null;
    do {
      const page = await reconcile.scan(cursor, 100);
      for (const t of page.targets) found.add(`${t.type}:${t.id}`);
      cursor = page.cursor;
    } while (cursor !== null);
    expect(group.filter((t) => !found.has(`${t.type}:${t.id}`))).toEqual([]);
    expect(await reconcile.size()).toBeGreaterThan(group.length);

    const [target] = group as [LikeableTarget];
    const item = { relation: "like" as const, target };
    await cluster.hincrby(keys.counters(target), "like", 3);
    const [seen] = await reconcile.inspect([item]);
    expect(await reconcile.recount(item, (seen?.version ?? 0n) + 1n)).toBe("changed");
    expect(await reconcile.recount(item, seen?.version ?? 0n)).toBe("recounted");
    expect((await counters.read([target]))[0]?.like).toBe(1);
    await counters.mirror([{ target, name: "comment", value: 4, seq: 2n }]);
    expect(await reconcile.counters([target])).toEqual([{ values: { comment: { value: 4, seq: 2n }, read: { value: 0, seq: 0n } }, version: seen?.version }]);
  });

  it("when changes wait in the outbox of every master, then a relay reads them, another claims those abandoned, and acknowledging empties it", async () => {
    const relayRedis = clients.relayRedis as Cluster;
    const options = { batchSize: clients.config.relay.batchSize, blockMs: 50 };
    const crashed = createOutboxStore(relayRedis, keys, options);
    const relay = createOutboxStore(relayRedis, keys, options);
    await crashed.open();
    await relay.open();
    // Whatever earlier tests left, so this one counts its own changes.
    // A read that names busy streams may come back empty while others wait: `more` says so.
    for (let read = await relay.read(); read.entries.length > 0 || read.more; read = await relay.read()) await relay.acknowledge(read.entries);
    expect(await relay.length()).toBe(0);

    const group = spread(12);
    const counters = createCounterStore(cluster, keys);
    const likes = createMembershipStore(cluster, keys);
    await Promise.all(group.map((t) => counters.init(t, { like: 0 })));
    await Promise.all(group.map((t) => likes.add("like", t, 31n)));
    await Promise.all(group.map((t) => likes.remove("like", t, 31n)));
    expect(await relay.length()).toBe(group.length * 2);

    // Reads are bounded over all streams together: read until the crashed relay holds everything.
    const taken: (OutboxEntry | MalformedOutboxEntry)[] = [];
    for (let read = await crashed.read(); read.entries.length > 0 || read.more; read = await crashed.read()) taken.push(...read.entries);
    const changes = taken.filter((e): e is OutboxEntry => "change" in e).map((e) => `${e.change.target.id}:${e.change.kind === "relation" && e.change.member}`);
    expect(changes.sort()).toEqual(group.flatMap((t) => [`${t.id}:true`, `${t.id}:false`]).sort());
    const claimed: (OutboxEntry | MalformedOutboxEntry)[] = [];
    for (let read = await relay.claimAbandoned(0); read.entries.length > 0 || read.more; read = await relay.claimAbandoned(0)) {
      claimed.push(...read.entries);
      await relay.acknowledge(read.entries);
    }
    expect(claimed.length).toBe(group.length * 2);
    expect(await relay.length()).toBe(0);
  });

  it("when processes share a lease, then one holds it and only its holder releases it", async () => {
    const lease = createLease(cluster, keys.reconcileLock());
    const other = createLease(cluster, keys.reconcileLock());
    const token = await lease.acquire(10_000);
    expect(token).not.toBeNull();
    expect(await other.acquire(10_000)).toBeNull();
    await other.release("not-the-holder");
    expect(await other.acquire(10_000)).toBeNull();
    await lease.release(token as string);
    expect(await other.acquire(10_000)).not.toBeNull();
  });

  it("when read-targets is sent targets of one slot, then it reaches their node although it takes its key count first", async () => {
    // Every key declared, as on a standalone Redis: the node accepts them when they share a slot.
    // Before routing by first key, the call joined the auto-pipeline of the node serving the slot of its key count.
    const countMaster = masterOf(await cluster.cluster("KEYSLOT", "6"));
    const candidates = spread(6);
    const candidateMasters = await Promise.all(candidates.map(async (t) => masterOf(await cluster.cluster("KEYSLOT", keys.counters(t)))));
    const first = candidates[candidateMasters.findIndex((m) => m !== countMaster)] as LikeableTarget;
    const sameSlot: LikeableTarget[] = [0n, 1n, 2n].map((k) => ({ type: "post", id: first.id + k * BigInt(keys.partitions) }));
    const elsewhere = spread(6);
    const counters = createCounterStore(cluster, keys);
    await Promise.all(sameSlot.map((t) => counters.init(t, { like: 0, read: 4 })));
    await createMembershipStore(cluster, keys).add("like", sameSlot[1] as LikeableTarget, 41n);
    const shardOf = keys.memberShardsOf("like", 41n);
    const args = [
      ...sameSlot.map((t) => keys.counters(t)),
      ...sameSlot.map((t) => shardOf(t, 0)),
      sameSlot.length,
      "41",
      2,
      "like",
      "read",
      1,
      relationLayouts.like.generationField,
      sameSlot.map(() => 1).join(""),
      "111",
      "0",
      0,
    ];

    // Alongside reads of other masters' targets, in one tick.
    const [[status, text]] = await Promise.all([cluster.readTargets(2 * sameSlot.length, ...args), counters.read(elsewhere)]);
    expect(status).toBe(ScriptStatus.Unchanged);
    expect(decodeTargetLines(text ?? "", sameSlot.length, ["like", "read"], ["like"]).map((r) => [r?.counts?.like, r?.counts?.read, r?.viewerIn.like])).toEqual(
      [
        [0, 4, false],
        [1, 4, true],
        [0, 4, false],
      ],
    );
  });

  it("when a feed of targets on every master is read, then each master runs one read-targets over its own; with the client's slot map out of date, the refused targets are read one by one", async () => {
    const feed = spread(30);
    expect((await mastersOf(feed)).size).toBe(3);
    const counters = createCounterStore(cluster, keys);
    await Promise.all(feed.map((t, i) => counters.init(t, { like: i, read: 2 * i })));
    await Promise.all(feed.filter((_, i) => i % 3 === 0).map((t) => createMembershipStore(cluster, keys).add("like", t as LikeableTarget, 77n)));
    const expected = feed.map((_, i) => ({ counts: { like: i + (i % 3 === 0 ? 1 : 0), read: 2 * i }, viewerIn: { like: i % 3 === 0 } }));
    const scriptCalls = async () =>
      // EVAL, EVALSHA and their read-only forms, which a read-only script is sent as.
      Promise.all(
        cluster
          .nodes("master")
          .map(async (node) => [...(await node.info("commandstats")).matchAll(/^cmdstat_eval\w*:calls=(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0)),
      );
    const request: ReadoutRequest = { viewerId: 77n, names: ["like", "read"], relations: ["like"] };

    const before = await scriptCalls();
    expect(await counters.readout(feed, request)).toEqual(expected);
    const after = await scriptCalls();
    expect(after.map((calls, m) => calls - (before[m] as number))).toEqual([1, 1, 1]);

    // A client whose slot map is out of date, as while slots move: it believes every key on one master, which refuses the others'.
    const stale = createCounterStore(cluster, keys, { nodeOf: () => "one node" });
    expect(await stale.readout(feed, request)).toEqual(expected);
  });

  it("when rate budgets of many subjects are charged at once, then each reaches its own node and each is enforced alone", async () => {
    const budgets = createRateBudgetStore(cluster, keys);
    const subjects = Array.from({ length: 24 }, (_, i) => `10.0.${i}.${Date.now() % 250}`);
    const slots = await Promise.all(subjects.map((s) => cluster.cluster("KEYSLOT", keys.rateBudget("ipMutations", s))));
    expect(new Set(slots.map(masterOf)).size).toBe(3);
    const charge = () => Promise.all(subjects.map((s) => budgets.charge("ipMutations", s, 1, 3, 60_000)));
    for (let round = 0; round < 3; round++) expect((await charge()).map((answer) => answer.waitMs)).toEqual(subjects.map(() => 0));
    const refused = await charge();
    expect(refused.every(({ waitMs }) => waitMs > 0 && waitMs <= 20_000)).toBe(true);
  });

  it("when spendings of many subjects are reported at once, then each reaches its own node and answers how far its own budget is spent", async () => {
    const budgets = createRateBudgetStore(cluster, keys);
    const subjects = Array.from({ length: 24 }, (_, i) => `10.1.${i}.${Date.now() % 250}`);
    const slots = await Promise.all(subjects.map((s) => cluster.cluster("KEYSLOT", keys.rateBudget("userMutations", s))));
    expect(new Set(slots.map(masterOf)).size).toBe(3);
    // 6 a minute: a unit is 10 s; subject i reports i % 3 + 1 units.
    const aheadMs = await budgets.report(subjects.map((subject, i) => ({ budget: "userMutations", subject, units: (i % 3) + 1, limit: 6, periodMs: 60_000 })));
    aheadMs.forEach((ms, i) => expect(Math.abs(ms - ((i % 3) + 1) * 10_000)).toBeLessThan(1_000));
  });

  it("when the hot ranking is mirrored, resent, refreshed and read, then its keys share one slot and each window sums its buckets", async () => {
    const ranking = createRankingStore(cluster, keys);
    const now = Date.now();
    const k = keys.ranking;
    const rankingKeys = [k.ready, k.lock, k.all.ranking, k.all.seqs, ...bucketedWindowNames.map((w) => k.window(w))];
    for (const span of bucketSpans)
      for (const start of windowBuckets(windowOfSpan(span), now)) rankingKeys.push(k.bucket(span, start).ranking, k.bucket(span, start).seqs);
    expect(new Set(await Promise.all(rankingKeys.map((key) => cluster.cluster("KEYSLOT", key)))).size).toBe(1);

    // Before a rebuild marked it, the ranking is missing and nothing is summed.
    expect(await ranking.refresh(now)).toBe("missing");
    const counts = (postId: bigint, likes: number, seq: bigint, atMs = now): BucketCount[] =>
      bucketSpans.map((span) => ({ span, startMs: bucketStart(span, atMs), postId, likes, seq }));
    await ranking.mirror(
      {
        buckets: [...counts(7n, 3, 2n), ...counts(9n, 3, 1n), ...counts(5n, 4, 1n, now - 3 * 86_400_000)],
        totals: [{ target: { type: "post", id: 7n }, name: "like", value: 5, seq: 4n }],
      },
      now,
    );
    // Resent and older writes: nothing moves.
    await ranking.mirror(
      { buckets: [...counts(7n, 3, 2n), ...counts(7n, 10, 1n)], totals: [{ target: { type: "post", id: 7n }, name: "like", value: 50, seq: 3n }] },
      now,
    );
    await ranking.markRebuilt();
    expect(await ranking.refresh(now)).toBe("refreshed");
    expect(await ranking.top("HOUR", 10)).toEqual([9n, 7n]);
    expect(await ranking.top("WEEK", 10)).toEqual([5n, 9n, 7n]);
    expect(await ranking.top("ALL", 10)).toEqual([7n]);
    // A post unliked to 0 leaves.
    await ranking.mirror({ buckets: counts(9n, 0, 5n), totals: [] }, now);
    await ranking.refresh(now);
    expect(await ranking.top("DAY", 10)).toEqual([7n]);
  });

  it("when a target's stamp names another replication history, then it is suspect: changes and views find it unloaded, and adopted at the version it stamped it is held again", async () => {
    const target: LikeableTarget = { type: "post", id: nextBase++ };
    await createCounterStore(cluster, keys).init(target, { like: 0 });
    const memberships = createMembershipStore(cluster, keys);
    expect(await memberships.add("like", target, 5n)).toMatchObject({ changed: true });
    const epoch = await cluster.hget(keys.counters(target), "ep");
    const micros = BigInt((await cluster.hget(keys.counters(target), "ver")) ?? "0");
    // As a failover or a slot's move leaves it: stamped by a history that is not its node's.
    await cluster.hset(keys.counters(target), "rh", "-5");
    const rebuilds = createRebuildStore(cluster, keys);
    expect(await rebuilds.held([target])).toEqual([
      { suspectAt: versionOf(BigInt(epoch ?? "0"), micros), nodeHistory: expect.stringMatching(/^-\d+$/) as string },
    ]);
    expect(await memberships.add("like", target, 6n)).toEqual({ kind: "unloaded" });
    // Views too, and they leave its version alone: one stamped now would pass the settling below without the lost changes.
    expect(await createViewStore(cluster, keys).add(target, 3, { sender: "cluster-test", seq: 1 })).toEqual({ kind: "unloaded" });
    expect(await cluster.hget(keys.counters(target), "ver")).toBe(micros.toString());
    expect(await rebuilds.adopt(target, versionOf(BigInt(epoch ?? "0"), micros - 1n))).toBe(false);
    expect(await rebuilds.adopt(target, versionOf(BigInt(epoch ?? "0"), micros))).toBe(true);
    expect(await rebuilds.held([target])).toEqual(["held"]);
    expect(await memberships.add("like", target, 6n)).toMatchObject({ changed: true, counts: { like: 2 } });
  });

  it("when the suite has run, then every script file is a defined command and ran on the cluster", async () => {
    const files = scriptFileNames();
    expect([...new Set(scriptFiles.values())].sort()).toEqual(files);
    expect(await scriptsRun(cluster, files)).toEqual(files.filter((file) => !standaloneOnlyScripts.has(file)));
    expect([...standaloneOnlyScripts].sort()).toEqual([
      "begin-member-index",
      "complete-member-index",
      "index-rules-out",
      "note-members",
      "register-writer",
      "settle-member-indexes",
    ]);
  });
});
