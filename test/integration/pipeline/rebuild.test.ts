// Losing Redis's data neither loses nor doubles a like: targets are rebuilt from
// PostgreSQL, and changes still in flight are neither lost nor counted twice.
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import type { Config } from "../../../src/config.js";
import type { Services } from "../../../src/domain/services.js";
import { createTargetLoader } from "../../../src/domain/target-loads.js";
import type { LikeableTarget, RelationChange, Target } from "../../../src/domain/model/index.js";
import { createChangePersistence } from "../../../src/domain/persistence.js";
import type { PersistStore, SnapshotStore } from "../../../src/domain/ports/index.js";
import { createPersistStore } from "../../../src/stores/postgres/persist-store.js";
import { createSnapshotStore } from "../../../src/stores/postgres/snapshot-store.js";
import { createCounterStore } from "../../../src/stores/redis/counter-store.js";
import { createListStore } from "../../../src/stores/redis/list-store.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { Cluster, type Redis } from "ioredis";
import { isRedisUnavailable, type RedisClient } from "../../../src/stores/redis/client.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { createRebuildStore } from "../../../src/stores/redis/rebuild-store.js";
import { redisState } from "../../support/agreement.js";
import { createUsers, emptyRedis, openRedis, privateRedisUrl, testConfig, type TestUser } from "../../support/env.js";
import { startTcpProxy } from "../../support/tcp-proxy.js";
import { startTestPipeline } from "../../support/pipeline.js";
import { agreeWithin, createPosts, servicesOn, useStores } from "../../support/stores.js";

let db: Database;
let redis: RedisClient;
let author: TestUser;

useStores((s) => ({ db, redis, author } = s));

const persistedLikes = (posts: LikeableTarget[]) => db.like.count({ where: { targetType: "post", targetId: { in: posts.map((p) => p.id) } } });

/** The targets' counts once each is loaded into Redis, as a write would load it (a read alone never loads). */
async function loadedCounts(services: Services, targets: readonly Target[]) {
  for (const target of targets) expect(await services.counters.rebuild(target)).toBe(true);
  return services.counters.read(targets);
}

describe("rebuild from PostgreSQL", () => {
  it("when Redis is flushed with nothing in flight, then counts come back equal, repeated likes change nothing, unlikes count down once, and PostgreSQL follows", async () => {
    const config = testConfig();
    const services = servicesOn({ db, redis }, config);
    const pipeline = await startTestPipeline(config);
    try {
      const posts = await createPosts({ db, redis }, config, author.id, 4);
      for (const [i, post] of posts.entries()) {
        await Promise.all(Array.from({ length: 30 + i * 200 }, (_, u) => services.memberships.join("like", post, BigInt(u + 1))));
      }
      await agreeWithin({ db, redis }, config, posts);
      const before = await redisState(redis, config.redisPartitions, posts);

      await emptyRedis(redis);
      // Two service instances, as two API processes would be, race to rebuild.
      const other = servicesOn({ db, redis }, config);
      const counts = await Promise.all([loadedCounts(services, posts), loadedCounts(other, posts)]);
      expect(counts[0].map((c) => c.like)).toEqual(before.map((s) => s.count));
      expect(counts[1].map((c) => c.like)).toEqual(before.map((s) => s.count));
      expect(await redisState(redis, config.redisPartitions, posts)).toEqual(before);

      const again = await Promise.all(posts.map((p, i) => (i % 2 ? other : services).memberships.join("like", p, 1n)));
      expect(again.map((r) => r.changed)).toEqual([false, false, false, false]);
      const unliked = await Promise.all([
        services.memberships.leave("like", posts[3] as LikeableTarget, 7n),
        other.memberships.leave("like", posts[3] as LikeableTarget, 7n),
      ]);
      expect(unliked.filter((r) => r.changed)).toHaveLength(1);
      const after = await services.counters.read(posts);
      expect(after.map((c) => c.like)).toEqual(before.map((s, i) => s.count - (i === 3 ? 1 : 0)));
      await agreeWithin({ db, redis }, config, posts);
    } finally {
      await pipeline.stop();
    }
  });

  it("when a target is rebuilt while its older changes are still in flight, then they are replayed once and nothing newer is undone", async () => {
    const config = testConfig();
    const services = servicesOn({ db, redis }, config);
    const posts = await createPosts({ db, redis }, config, author.id, 1);
    const post = posts[0] as LikeableTarget;
    // Changes made with no pipeline running stay in flight (in the outbox).
    await services.memberships.join("like", post, 1n);
    await services.memberships.join("like", post, 2n);
    await services.memberships.join("like", post, 3n);
    const inFlight = await redis.xrange(`ob:{${Number(post.id % BigInt(config.redisPartitions))}}`, "-", "+");
    // Redis loses the target (not the outbox), and it is rebuilt from PostgreSQL, which has none of them.
    const rebuilds = createRebuildStore(redis, createRedisKeys(config.redisPartitions));
    expect(await rebuilds.evict(post, 0n)).toBe("kept");
    expect(await rebuilds.evict(post, 1n << 62n)).toBe("evicted");
    expect((await loadedCounts(services, posts))[0]?.like).toBe(0);
    // After the rebuild, user 2 unlikes (not a member now: no change) and likes again; user 4 likes.
    expect((await services.memberships.join("like", post, 2n)).changed).toBe(true);
    expect((await services.memberships.join("like", post, 4n)).changed).toBe(true);
    expect(inFlight.length).toBeGreaterThanOrEqual(3);

    const pipeline = await startTestPipeline(config);
    try {
      await agreeWithin({ db, redis }, config, posts);
      const [state] = await redisState(redis, config.redisPartitions, posts);
      expect(state).toEqual({ members: ["1", "2", "3", "4"], count: 4 });
      expect(await persistedLikes(posts)).toBe(4);
    } finally {
      await pipeline.stop();
    }
  });

  it("when Redis is flushed during a burst of likes, then afterwards Redis and PostgreSQL agree and no acknowledged like is doubled or lost beyond what the outbox held at the flush", async () => {
    const config = testConfig({ PERSIST_LINGER_MS: "200" });
    const services = servicesOn({ db, redis }, config);
    const pipeline = await startTestPipeline(config);
    const posts = await createPosts({ db, redis }, config, author.id, 5);
    const acknowledged: { post: LikeableTarget; user: bigint }[] = [];
    let outboxAtFlush: number;
    try {
      let user = 0n;
      const burst = (async () => {
        for (let round = 0; round < 25; round++) {
          await Promise.all(
            Array.from({ length: 40 }, async (_, i) => {
              const post = posts[i % 5] as LikeableTarget;
              const u = ++user;
              const result = await services.memberships.join("like", post, u).catch(() => null);
              if (result?.changed) acknowledged.push({ post, user: u });
            }),
          );
          await sleep(40);
        }
      })();
      await sleep(400);
      outboxAtFlush = await flushCountingOutbox(
        redis,
        Array.from({ length: config.redisPartitions }, (_, p) => `ob:{${p}}`),
      );
      await burst;

      await agreeWithin({ db, redis }, config, posts, 60_000);
      const rows = await db.like.findMany({
        where: { targetType: "post", targetId: { in: posts.map((p) => p.id) } },
        select: { targetId: true, userId: true },
      });
      const stored = new Set(rows.map((r) => `${r.targetId}:${r.userId}`));
      const lost = acknowledged.filter((a) => !stored.has(`${a.post.id}:${a.user}`));
      expect(acknowledged.length).toBeGreaterThan(500);
      expect(lost.length).toBeLessThanOrEqual(outboxAtFlush);
      // Counted once: every target's count equals its rows (checked by the agreement above), and no row is extra.
      expect(rows.length).toBeLessThanOrEqual(acknowledged.length);
    } finally {
      await pipeline.stop();
    }
  });

  it("when a change older than the newest commits between a rebuild's snapshot and its counter hash (two persist lanes), then the rebuild still brings it in", async () => {
    const config = testConfig();
    const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
    const { rebuilds, persistence, counterStore } = lanes(config);
    const now = BigInt(Date.now()) * 1000n;
    // One lane commits the newer change; Redis then loses the target. Redis never stamped that
    // change (the test made it), so the commit found Redis behind PostgreSQL and took the target out already.
    await persistence.persist([change(post, 1n, true, now)]);
    expect(await rebuilds.drop(post)).toBe("absent");
    // The other lane's older change commits after the rebuild read its snapshot, before the
    // rebuilt hash exists: that lane finds nothing to replay into.
    const snapshots = createSnapshotStore(db);
    const racing: SnapshotStore = {
      ...snapshots,
      async read(targets) {
        const snapshot = await snapshots.read(targets);
        await persistence.persist([change(post, 2n, true, now - 1_000n)]);
        return snapshot;
      },
    };
    const loader = createTargetLoader({
      counterStore,
      rebuildStore: rebuilds,
      snapshots: racing,
      lookup: async (targets) => targets.map(() => ({ authorId: author.id })),
    });
    expect(await loader.load([post])).toEqual(["loaded"]);
    expect((await counterStore.read([post]))[0]?.like).toBe(2);
    await agreeWithin({ db, redis }, config, [post]);
  });

  it("when a load's write reaches Redis but its answer is lost, then the load fails, the other targets still get the changes committed after their snapshot, and the lost one goes", async () => {
    const config = testConfig();
    const [post, lost] = (await createPosts({ db, redis }, config, author.id, 2)) as [LikeableTarget, LikeableTarget];
    const { rebuilds, persistence, counterStore } = lanes(config);
    expect([await rebuilds.drop(post), await rebuilds.drop(lost)]).toEqual(["evicted", "evicted"]);
    // A like of each commits after the snapshot, before the hashes exist.
    const snapshots = createSnapshotStore(db);
    const now = BigInt(Date.now()) * 1000n;
    const racing: SnapshotStore = {
      ...snapshots,
      async read(targets) {
        const snapshot = await snapshots.read(targets);
        await persistence.persist([change(post, 3n, true, now), change(lost, 3n, true, now)]);
        return snapshot;
      },
    };
    // The lost target's write goes through a proxy that drops Redis's replies: it applies, its answer never comes.
    const url = new URL(privateRedisUrl());
    const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
    const proxied = await openRedis({ url: proxy.url, commandTimeoutMs: 300 });
    proxied.on("error", () => undefined);
    try {
      const viaProxy = createRebuildStore(proxied, createRedisKeys(config.redisPartitions));
      await viaProxy.held([lost]);
      proxy.dropReplies();
      const loader = createTargetLoader({
        counterStore,
        rebuildStore: { ...rebuilds, write: (target, ...rest) => (target.id === lost.id ? viaProxy : rebuilds).write(target, ...rest) },
        snapshots: racing,
        lookup: async (targets) => targets.map(() => ({ authorId: author.id })),
      });
      await expect(loader.load([post, lost])).rejects.toThrow();
      expect((await counterStore.read([post]))[0]?.like).toBe(1);
      expect(await rebuilds.held([post, lost])).toEqual(["held", "absent"]);
      // Its next load brings it back whole.
      const again = createTargetLoader({
        counterStore,
        rebuildStore: rebuilds,
        snapshots,
        lookup: async (targets) => targets.map(() => ({ authorId: author.id })),
      });
      expect(await again.load([lost])).toEqual(["loaded"]);
      await agreeWithin({ db, redis }, config, [post, lost]);
    } finally {
      proxied.disconnect();
      await proxy.close();
    }
  });

  it("when PostgreSQL commits a change newer than what Redis's target last stamped (Redis lost it), then the target goes and loads again with it", async () => {
    const config = testConfig();
    const services = servicesOn({ db, redis }, config);
    const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
    const { rebuilds, persistence } = lanes(config);
    const [held] = await rebuilds.rebuilds([post]);
    expect(held?.version).toBeDefined();
    // As a failover leaves it: the relay carried user 6's like to PostgreSQL, and Redis lost it.
    await persistence.persist([change(post, 6n, true, (held?.version ?? 0n) + 1_000n)]);
    expect(await rebuilds.held([post])).toEqual(["absent"]);
    expect((await loadedCounts(services, [post]))[0]?.like).toBe(1);
    expect(await services.memberships.join("like", post, 6n)).toMatchObject({ changed: false });
  });

  it("when changes stamped by a clock ahead of the rebuilding Redis are still in flight, then changes made after the rebuild still win in PostgreSQL", async () => {
    const config = testConfig();
    const services = servicesOn({ db, redis }, config);
    const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
    const { rebuilds, persistence } = lanes(config);
    expect(await rebuilds.drop(post)).toBe("evicted");
    expect((await loadedCounts(services, [post]))[0]?.like).toBe(0);
    // After the rebuild, user 5 likes and unlikes (both wait in the outbox)...
    expect((await services.memberships.join("like", post, 5n)).changed).toBe(true);
    expect((await services.memberships.leave("like", post, 5n)).changed).toBe(true);
    // ...while their like from before the loss, stamped an hour ahead, reaches PostgreSQL first.
    const ahead = BigInt(Date.now() + 3_600_000) * 1000n;
    await persistence.persist([change(post, 5n, true, ahead)]);
    expect((await loadedCounts(services, [post]))[0]?.like).toBe(0);

    const pipeline = await startTestPipeline(config);
    try {
      await agreeWithin({ db, redis }, config, [post]);
      expect(await persistedLikes([post])).toBe(0);
    } finally {
      await pipeline.stop();
    }
  });

  it("when a user's change is still in flight as their target is rebuilt, then what they are answered next is what both stores end with", async () => {
    const config = testConfig();
    const services = servicesOn({ db, redis }, config);
    const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
    const { rebuilds } = lanes(config);
    // Both wait in the outbox when Redis loses the target; the rebuild cannot see them.
    expect((await services.memberships.join("like", post, 9n)).changed).toBe(true);
    expect((await services.memberships.leave("like", post, 10n)).changed).toBe(false);
    expect((await services.memberships.join("like", post, 10n)).changed).toBe(true);
    expect(await rebuilds.drop(post)).toBe("evicted");
    // Rebuilt without them: user 9 is answered "not liked", user 10 "liked".
    expect((await services.memberships.leave("like", post, 9n)).changed).toBe(false);
    const again = await services.memberships.join("like", post, 10n);
    expect(again).toMatchObject({ changed: true, counts: { like: 1 } });

    const pipeline = await startTestPipeline(config);
    try {
      await agreeWithin({ db, redis }, config, [post]);
      const [state] = await redisState(redis, config.redisPartitions, [post]);
      expect(state).toEqual({ members: ["10"], count: 1 });
      expect(await persistedLikes([post])).toBe(1);
    } finally {
      await pipeline.stop();
    }
  });

  it("when a target is dropped with a change in flight and the pipeline running, then its rebuild waits for the change and answers from it", async () => {
    const config = testConfig({ PERSIST_LINGER_MS: "300" });
    const services = servicesOn({ db, redis }, config);
    const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
    const { rebuilds } = lanes(config);
    const pipeline = await startTestPipeline(config);
    try {
      expect((await services.memberships.join("like", post, 11n)).changed).toBe(true);
      expect(await rebuilds.drop(post)).toBe("evicted");
      // The like is still lingering in a batch: only a rebuild that waits for it sees it.
      expect(await services.memberships.leave("like", post, 11n)).toMatchObject({ changed: true, counts: { like: 0 } });
      await agreeWithin({ db, redis }, config, [post]);
      expect(await persistedLikes([post])).toBe(0);
    } finally {
      await pipeline.stop();
    }
  });

  it("when a target is dropped with a change in flight and a load that failed opened a new epoch, then a read still waits for the change", async () => {
    const config = testConfig({ PERSIST_LINGER_MS: "300" });
    const services = servicesOn({ db, redis }, config);
    const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
    const { rebuilds } = lanes(config);
    const pipeline = await startTestPipeline(config);
    try {
      expect((await services.memberships.join("like", post, 12n)).changed).toBe(true);
      expect(await rebuilds.drop(post)).toBe("evicted");
      // A load's snapshot opens the next epoch in PostgreSQL; the load goes no further.
      await createSnapshotStore(db).read([post]);
      // The like is still lingering in a batch: the read answers from PostgreSQL once it is there.
      const [view] = await services.counters.readout([post], 12n, ["like"], { deadlineAtMs: Date.now() + 5_000 });
      expect(view).toMatchObject({ counts: { like: 1 }, viewerIn: { like: true } });
    } finally {
      await pipeline.stop();
    }
  });

  it("when a lane's replay is delayed past a rebuild whose snapshot holds a newer change of the pair, then the older change is not put back", async () => {
    const config = testConfig();
    const services = servicesOn({ db, redis }, config);
    const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
    const { rebuilds, persistence, counterStore } = lanes(config);
    // Lane A commits its like, then stalls before looking for rebuilt targets to replay into.
    const persistStore = createPersistStore(db);
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let committed = () => {};
    const hasCommitted = new Promise<void>((resolve) => (committed = resolve));
    const stalling: PersistStore = {
      async apply(changes) {
        const applied = await persistStore.apply(changes);
        committed();
        await held;
        return applied;
      },
    };
    const laneA = createChangePersistence({
      persistStore: stalling,
      rebuilds,
      snapshots: createSnapshotStore(db),
      counters: counterStore,
      lists: createListStore(redis, createRedisKeys(config.redisPartitions)),
      isRedisUnavailable,
    });
    const now = BigInt(Date.now()) * 1000n;
    const liking = laneA.persist([change(post, 12n, true, now)]);
    await hasCommitted;
    // Lane B commits the newer unlike; then the target is lost (Redis never stamped these changes:
    // the commit found Redis behind PostgreSQL and took it out) and rebuilt with both seen.
    await persistence.persist([change(post, 12n, false, now + 1_000n)]);
    expect(await rebuilds.drop(post)).toBe("absent");
    expect((await loadedCounts(services, [post]))[0]?.like).toBe(0);
    release();
    await liking;
    expect((await loadedCounts(services, [post]))[0]?.like).toBe(0);
    await agreeWithin({ db, redis }, config, [post]);
  });

  it("when a worker dies between committing a late change and replaying it, then the redelivered change is replayed", async () => {
    const config = testConfig();
    const services = servicesOn({ db, redis }, config);
    const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
    const { rebuilds, persistence } = lanes(config);
    expect(await rebuilds.drop(post)).toBe("evicted");
    expect((await loadedCounts(services, [post]))[0]?.like).toBe(0);
    // Made before the rebuild, committed after it by a worker that died before its replay.
    const late = change(post, 13n, true, BigInt(Date.now()) * 1000n - 5_000_000n);
    await createPersistStore(db).apply([late]);
    // The broker redelivers it: PostgreSQL has it already, Redis does not.
    await persistence.persist([late]);
    expect((await loadedCounts(services, [post]))[0]?.like).toBe(1);
    await agreeWithin({ db, redis }, config, [post]);
  });

  it("when a user's following is credited after the rebuild read its snapshot and before its hash exists, then the rebuilt user shows the credit", async () => {
    const config = testConfig();
    const [star, fan] = await createUsers(db, config, 2);
    const fanTarget = { type: "user", id: fan!.id } as const;
    const { rebuilds, persistence, counterStore } = lanes(config);
    const snapshots = createSnapshotStore(db);
    // The follow commits (and its credit is mirrored, finding no hash) while the fan is being rebuilt.
    const racing: SnapshotStore = {
      ...snapshots,
      async read(targets) {
        const snapshot = await snapshots.read(targets);
        const follow: RelationChange = {
          kind: "relation",
          relation: "follow",
          target: { type: "user", id: star!.id },
          userId: fan!.id,
          authorId: null,
          member: true,
          version: BigInt(Date.now()) * 1000n,
          at: new Date(),
        };
        await persistence.persist([follow]);
        return snapshot;
      },
    };
    const loader = createTargetLoader({
      counterStore,
      rebuildStore: rebuilds,
      snapshots: racing,
      lookup: async (targets) => targets.map(() => ({ authorId: null })),
    });
    expect(await loader.load([fanTarget])).toEqual(["loaded"]);
    expect((await counterStore.read([fanTarget]))[0]?.following).toBe(1);
  });
});

/** The stores two persist lanes share, as compose() wires them for the pipeline. */
function lanes(config: Config) {
  const keys = createRedisKeys(config.redisPartitions);
  const rebuilds = createRebuildStore(redis, keys);
  const counterStore = createCounterStore(redis, keys);
  const persistence = createChangePersistence({
    persistStore: createPersistStore(db),
    rebuilds,
    snapshots: createSnapshotStore(db),
    counters: counterStore,
    lists: createListStore(redis, keys),
    isRedisUnavailable,
  });
  return { rebuilds, persistence, counterStore };
}

const change = (target: LikeableTarget, userId: bigint, member: boolean, version: bigint): RelationChange => ({
  kind: "relation",
  relation: "like",
  target,
  userId,
  authorId: author.id,
  member,
  version,
  at: new Date(),
});
/**
 * Counts the entries waiting in `streams` and empties the server, atomically. A script rather
 * than MULTI: a cluster node refuses a transaction over keys of many slots, and a script over
 * keys of its own slots only when it says so.
 */
async function flushCounting(server: Redis, streams: readonly string[]): Promise<number> {
  const script = [
    "#!lua flags=allow-cross-slot-keys",
    "local n = 0",
    "for _, stream in ipairs(ARGV) do n = n + redis.call('XLEN', stream) end",
    "redis.call('FLUSHALL')",
    "return n",
  ].join("\n");
  return Number(await server.eval(script, 0, ...streams));
}

/**
 * Empties Redis and answers how many outbox entries went with it: what waited there at the flush
 * is lost with it. On a cluster each master counts the streams of its own slots and flushes at once.
 */
async function flushCountingOutbox(redis: RedisClient, streams: readonly string[]): Promise<number> {
  if (!(redis instanceof Cluster)) return flushCounting(redis, streams);
  const ranges = await redis.cluster("SLOTS");
  const slots = await Promise.all(streams.map((s) => redis.cluster("KEYSLOT", s)));
  const masters = redis.nodes("master");
  const owned = (port: number | undefined) =>
    streams.filter((_, i) => ranges.some(([first, last, master]) => master?.[1] === port && (slots[i] as number) >= first && (slots[i] as number) <= last));
  const counts = await Promise.all(masters.map((master) => flushCounting(master, owned(master.options.port))));
  return counts.reduce((a, b) => a + b, 0);
}
