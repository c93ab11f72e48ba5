// The feed read (read-targets.lua: one call on a standalone Redis, one per master on a cluster)
// answers what plain commands read of the same targets.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Counts, LikeableTarget, Target, TargetReadout } from "../../../../src/domain/model/index.js";
import type { RedisClient } from "../../../../src/stores/redis/client.js";
import { createCounterStore } from "../../../../src/stores/redis/counter-store.js";
import { createRedisKeys, generationField } from "../../../../src/stores/redis/keys.js";
import { createMembershipStore } from "../../../../src/stores/redis/membership-store.js";
import { clusterNodes, openRedis } from "../../../support/env.js";

const keys = createRedisKeys(1024);
const postCounters = ["like", "read", "comment", "collect"] as const;
// Small shards, so a few hundred likers take a target through several generations.
const shardCapacity = 16;
let nextId = BigInt(Date.now()) * 1000n;

describe.each([
  ["a standalone Redis", () => openRedis()],
  ["a Redis Cluster", () => openRedis({ clusterNodes: clusterNodes() })],
])("feed reads on %s", (_, open) => {
  let redis: RedisClient;
  beforeAll(async () => {
    redis = await open();
  });
  afterAll(async () => {
    await redis.quit();
  });

  /** A post with users 1..likers as likers, and every third of them as collectors. */
  async function post(likers: number, counts: Counts = { like: 0 }): Promise<LikeableTarget> {
    const target: LikeableTarget = { type: "post", id: nextId++ };
    await createCounterStore(redis, keys).init(target, counts, 1n);
    const likes = createMembershipStore(redis, keys, shardCapacity);
    for (let u = 1; u <= likers; u++) {
      await likes.add("like", target, BigInt(u));
      if (u % 3 === 0) await likes.add("collect", target, BigInt(u));
    }
    return target;
  }

  /** The same facts read with HGETALL and SISMEMBER, one target at a time. */
  async function plainly(targets: readonly LikeableTarget[], viewer: bigint | null): Promise<(TargetReadout | null)[]> {
    const counters = createCounterStore(redis, keys);
    const likes = createMembershipStore(redis, keys, shardCapacity);
    return Promise.all(
      targets.map(async (t) => {
        const [all] = await counters.read([t]);
        if (!all) return null;
        const counts = Object.fromEntries(postCounters.filter((n) => all[n] !== undefined).map((n) => [n, all[n]]));
        const member = async (relation: "like" | "collect") => (viewer === null ? false : ((await likes.holds(relation, [t], viewer))[0] as boolean));
        return { counts, viewerIn: { like: await member("like"), collect: await member("collect") } };
      }),
    );
  }

  it("when targets are absent, small or grown through generations, then every viewer's view equals the plain commands' answer", async () => {
    const small = await post(3, { like: 0, read: 7, comment: 2 });
    const grown = await post(300);
    const absent: LikeableTarget = { type: "post", id: nextId++ };
    const empty = await post(0);
    const targets = [small, grown, absent, empty, grown];
    expect(Number(await redis.hget(keys.counters(grown), generationField))).toBeGreaterThanOrEqual(2);

    for (const viewer of [1n, 2n, 150n, 299n, 300n, 9_999n, null]) {
      const store = createCounterStore(redis, keys);
      const views = await store.readout(targets, { names: postCounters, relations: ["like", "collect"], viewerId: viewer });
      expect(views).toEqual(await plainly(targets, viewer));
    }
    const [view] = await createCounterStore(redis, keys).readout([small], { names: postCounters, relations: ["like", "collect"], viewerId: 3n });
    expect(view).toEqual({ counts: { like: 3, read: 7, comment: 2, collect: 1 }, viewerIn: { like: true, collect: true } });
  });

  it("when a target grows after this process last read it, then a like in the new generation is still found", async () => {
    const target = await post(10);
    const store = createCounterStore(redis, keys);
    const late = 250n;
    const request = { names: postCounters, relations: ["like", "collect"] as const, viewerId: late };
    expect((await store.readout([target], request))[0]?.viewerIn).toEqual({ like: false, collect: false });
    const likes = createMembershipStore(redis, keys, shardCapacity);
    for (let u = 11n; u <= late; u++) await likes.add("like", target, u);
    expect(Number(await redis.hget(keys.counters(target), generationField))).toBeGreaterThan(0);
    expect((await store.readout([target], request))[0]).toEqual({ counts: { like: 250, collect: 3 }, viewerIn: { like: true, collect: false } });
  });

  it("when users are read, then their own counters come back with whether the viewer follows them", async () => {
    const user: Target = { type: "user", id: nextId++ };
    await createCounterStore(redis, keys).init(user, { followers: 0, posts: 2 });
    await createMembershipStore(redis, keys).add("follow", user, 8n);
    const read = (viewerId: bigint | null) =>
      createCounterStore(redis, keys).readout([user], { names: ["followers", "following", "posts"], relations: ["follow"], viewerId });
    expect(await read(null)).toEqual([{ counts: { followers: 1, posts: 2 }, viewerIn: { follow: false } }]);
    expect(await read(8n)).toEqual([{ counts: { followers: 1, posts: 2 }, viewerIn: { follow: true } }]);
    expect(await read(9n)).toEqual([{ counts: { followers: 1, posts: 2 }, viewerIn: { follow: false } }]);
  });
});
