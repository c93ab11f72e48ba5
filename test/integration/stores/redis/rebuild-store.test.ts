import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LikeableTarget } from "../../../../src/domain/model.js";
import type { RedisClient } from "../../../../src/stores/redis/client.js";
import { parseCounterHash } from "../../../../src/stores/redis/counter-hash.js";
import { createCounterStore } from "../../../../src/stores/redis/counter-store.js";
import { createRedisKeys } from "../../../../src/stores/redis/keys.js";
import { createLikeStore } from "../../../../src/stores/redis/like-store.js";
import { createRebuildStore, rebuildGeneration } from "../../../../src/stores/redis/rebuild-store.js";
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
    expect(await store.write(target, { members, counts: { comment: 4 }, version: 77n }, 9n)).toBe(true);
    expect(await store.write(target, { members: [], counts: {}, version: 1n }, 9n)).toBe(false);
    const hash = parseCounterHash(await redis.hgetall(keys.counters(target)));
    expect(hash).toMatchObject({ counts: { like: 3_000, comment: 4 }, authorId: 9n, version: 77n, generation: rebuildGeneration(members, 64) });
    const liked = await createLikeStore(redis, keys).hasLiked([target, target], 14n);
    expect(liked).toEqual([true, true]);
  });

  it("when late changes of one user are replayed out of order, then the newest wins and the target's version follows", async () => {
    const target: LikeableTarget = { type: "post", id: nextId++ };
    const store = createRebuildStore(redis, keys);
    await store.write(target, { members: [5n], counts: {}, version: 10n }, null);
    const rebuiltAt = (await store.rebuiltAt([target]))[0] as bigint;
    const older = rebuiltAt - 2_000n;
    const newer = rebuiltAt - 1_000n;
    expect(await store.replay({ target, userId: 5n, liked: false, version: newer })).toBe(true);
    expect(await store.replay({ target, userId: 5n, liked: true, version: older })).toBe(false);
    expect(parseCounterHash(await redis.hgetall(keys.counters(target)))).toMatchObject({ counts: { like: 0 }, version: newer });
    // A change Redis made itself after the rebuild is newer than any late one.
    await createLikeStore(redis, keys).like(target, 6n);
    expect(await store.replay({ target, userId: 6n, liked: false, version: newer })).toBe(false);
    expect((await createCounterStore(redis, keys).read([target]))[0]?.like).toBe(1);
  });
});
