import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LikeableTarget } from "../../../../src/domain/model.js";
import type { RedisClient } from "../../../../src/stores/redis/client.js";
import { parseCounterHash } from "../../../../src/stores/redis/counter-hash.js";
import { createCounterStore } from "../../../../src/stores/redis/counter-store.js";
import { createRedisKeys } from "../../../../src/stores/redis/keys.js";
import { createLikeStore } from "../../../../src/stores/redis/like-store.js";
import { createRebuildStore, rebuildGeneration } from "../../../../src/stores/redis/rebuild-store.js";
import { versionOf } from "../../../../src/stores/versions.js";
import { openRedis } from "../../../support/env.js";

let redis: RedisClient;
const keys = createRedisKeys(1024);
let nextId = BigInt(Date.now()) * 1000n + 500n;

beforeAll(async () => {
  redis = await openRedis();
});
afterAll(async () => {
  await redis.quit();
});

describe("rebuild store", () => {
  it("when a target is rebuilt, then every member is found, no shard is over capacity, and counts come from the members", async () => {
    const target: LikeableTarget = { type: "post", id: nextId++ };
    const members = Array.from({ length: 3_000 }, (_, i) => BigInt(i * 13 + 1));
    const store = createRebuildStore(redis, keys, 64);
    expect(await store.write(target, { members, counts: { comment: 4 }, version: 77n, epoch: 3n, mark: "100:100:" }, 9n)).toBe(true);
    expect(await store.write(target, { members: [], counts: {}, version: 1n, epoch: 4n, mark: "100:100:" }, 9n)).toBe(false);
    const hash = parseCounterHash(await redis.hgetall(keys.counters(target)));
    // The rebuilt target starts its epoch: its version is the epoch's first.
    expect(hash).toMatchObject({ counts: { like: 3_000, comment: 4 }, authorId: 9n, version: versionOf(3n, 0n), generation: rebuildGeneration(members, 64) });
    const liked = await createLikeStore(redis, keys).hasLiked([target, target], 14n);
    expect(liked).toEqual([true, true]);
  });

  it("when late changes of one user are replayed out of order, then the newest wins and the target's version stays its epoch's", async () => {
    const target: LikeableTarget = { type: "post", id: nextId++ };
    const store = createRebuildStore(redis, keys);
    await store.write(target, { members: [5n], counts: {}, version: 10n, epoch: 2n, mark: "100:100:" }, null);
    expect(await store.rebuilds([target])).toEqual([{ epoch: 2n, epochStart: versionOf(2n, 0n), mark: "100:100:" }]);
    // Made before the rebuild (epoch 1), by a clock far ahead of the rebuilding Redis's.
    const ahead = BigInt(Date.now() + 3_600_000) * 1000n;
    const older = versionOf(1n, ahead);
    const newer = versionOf(1n, ahead + 1_000n);
    expect(await store.replay({ target, userId: 5n, liked: false, version: newer, intoEpoch: 2n })).toBe("replayed");
    expect(await store.replay({ target, userId: 5n, liked: true, version: older, intoEpoch: 2n })).toBe("unchanged");
    expect(parseCounterHash(await redis.hgetall(keys.counters(target)))).toMatchObject({ counts: { like: 0 }, version: versionOf(2n, 0n) });
    // A change Redis made itself after the rebuild is newer than any late one, whatever the clocks said.
    await createLikeStore(redis, keys).like(target, 6n);
    expect(await store.replay({ target, userId: 6n, liked: false, version: newer, intoEpoch: 2n })).toBe("unchanged");
    expect((await createCounterStore(redis, keys).read([target]))[0]?.like).toBe(1);
    // Changes of the epoch itself or later are Redis's own: never replayed.
    expect(await store.replay({ target, userId: 7n, liked: true, version: versionOf(2n, 5n), intoEpoch: 2n })).toBe("unchanged");
  });

  it("when a late change arrives after the rebuild window, then it is too late to replay and the target can be dropped whole", async () => {
    const target: LikeableTarget = { type: "post", id: nextId++ };
    const store = createRebuildStore(redis, keys);
    await store.write(target, { members: [5n], counts: {}, version: 10n, epoch: 2n, mark: "100:100:" }, null);
    // Rebuilt two hours ago, as far as the window can tell.
    await redis.hset(keys.counters(target), "rb", String((BigInt(Date.now()) - 7_200_000n) * 1000n));
    expect(await store.replay({ target, userId: 8n, liked: true, version: versionOf(1n, 5n), intoEpoch: 2n })).toBe("tooLate");
    await createLikeStore(redis, keys).like(target, 6n);
    // Unpersisted changes do not keep a drop from taking the target out (eviction would refuse).
    expect(await store.evict(target, versionOf(2n, 0n))).toBe("kept");
    expect(await store.drop(target)).toBe("evicted");
    expect((await createCounterStore(redis, keys).read([target]))[0]).toBeNull();
  });

  it("when more users change a rebuilt target than its record of them may hold, then the record stays under the key bound and an unknown late change is too late", async () => {
    const target: LikeableTarget = { type: "post", id: nextId++ };
    const store = createRebuildStore(redis, keys);
    const likes = createLikeStore(redis, keys);
    await store.write(target, { members: [], counts: {}, version: 0n, epoch: 2n, mark: "100:100:" }, null);
    for (let u = 1; u <= 10_500; u += 500) {
      await Promise.all(Array.from({ length: 500 }, (_, i) => likes.like(target, BigInt(u + i))));
    }
    expect(await redis.hlen(keys.touched(target))).toBeLessThanOrEqual(10_000);
    // A user noted early: its late change is superseded. One never noted: too late to tell.
    expect(await store.replay({ target, userId: 1n, liked: false, version: versionOf(1n, 5n), intoEpoch: 2n })).toBe("unchanged");
    expect(await store.replay({ target, userId: 10_400n, liked: false, version: versionOf(1n, 5n), intoEpoch: 2n })).toBe("tooLate");
    expect((await createCounterStore(redis, keys).read([target]))[0]?.like).toBe(10_500);
  });
});
