// Users' lists in Redis (scripts/apply-list-changes.lua, scripts/load-list.lua):
// changes applied in any order end in the newest state, a load does not bring
// back what changed while it read PostgreSQL, and no key outgrows its bound.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ListPosition } from "../../../../src/domain/model/index.js";
import type { ListChange } from "../../../../src/domain/ports/index.js";
import type { RedisClient } from "../../../../src/stores/redis/client.js";
import { createRedisKeys } from "../../../../src/stores/redis/keys.js";
import { createListStore } from "../../../../src/stores/redis/list-store.js";
import { openRedis } from "../../../support/env.js";

let redis: RedisClient;
const keys = createRedisKeys(1024);
let nextUser = BigInt(Date.now()) * 1000n + 700_000n;
const at = (ms: number) => new Date(1_795_000_000_000 + ms);
const change = (targetId: bigint, member: boolean, version: bigint): ListChange => ({ targetId, member, version, at: at(Number(version)) });

beforeAll(async () => {
  redis = await openRedis();
});
afterAll(async () => {
  await redis.quit();
});

/** Loads the user's list as if PostgreSQL held `rows` (newest first) and `horizon`, with `meanwhile` happening while it read. */
async function load(userId: bigint, rows: readonly ListPosition[], horizon: ListPosition | null, meanwhile: () => Promise<unknown> = async () => {}) {
  const lists = createListStore(redis, keys);
  const token = (await lists.lock("like", userId, 10_000)) as string;
  await lists.begin("like", userId);
  await meanwhile();
  await lists.finish("like", userId, rows, horizon);
  await lists.unlock("like", userId, token);
}

const ids = async (userId: bigint) => (await createListStore(redis, keys).read("like", userId))?.entries.map((e) => e.targetId);

describe("a user's list in Redis", () => {
  it("when a post is unliked and persisted while the list loads from PostgreSQL rows that still hold it, then the load leaves it out", async () => {
    const user = nextUser++;
    const lists = createListStore(redis, keys);
    await lists.apply("like", user, [change(5n, true, 10n)], false);
    // PostgreSQL was read holding the like; meanwhile the unlike came from the API, and again from the pipeline.
    await load(
      user,
      [
        { targetId: 5n, at: at(10) },
        { targetId: 4n, at: at(5) },
      ],
      null,
      async () => {
        await lists.apply("like", user, [change(5n, false, 20n)], false);
        await lists.apply("like", user, [change(5n, false, 20n)], true);
      },
    );
    expect(await ids(user)).toEqual([4n]);
  });

  it("when two changes of a post arrive in either order, from the API and again once persisted, then the list ends in the newest", async () => {
    const user = nextUser++;
    const lists = createListStore(redis, keys);
    await load(user, [], null);
    await lists.apply("like", user, [change(7n, true, 30n)], false);
    await lists.apply("like", user, [change(7n, false, 40n)], false);
    // The like's persisted write comes last (its batch committed first, but reached Redis after the unlike's).
    await lists.apply("like", user, [change(7n, false, 40n)], true);
    await lists.apply("like", user, [change(7n, true, 30n)], true);
    expect(await ids(user)).toEqual([]);
    await lists.apply("like", user, [change(7n, true, 50n)], false);
    expect(await ids(user)).toEqual([7n]);
  });

  it("when a user likes more than the list keeps, then it keeps the newest 100 and its horizon moves to the newest it dropped", async () => {
    const user = nextUser++;
    const lists = createListStore(redis, keys);
    await load(user, [], null);
    await lists.apply(
      "like",
      user,
      Array.from({ length: 150 }, (_, i) => change(BigInt(i + 1), true, BigInt(1000 + i))),
      false,
    );
    const list = await lists.read("like", user);
    expect(list?.entries).toHaveLength(100);
    expect(list?.entries[0]).toEqual({ targetId: 150n, at: at(1149) });
    expect(list?.horizon).toEqual({ targetId: 50n, at: at(1049) });
  });

  it("when a user changes more posts in two minutes than a key may record, then the list is dropped, to be loaded again, and no key holds more than 10,000", async () => {
    const user = nextUser++;
    const lists = createListStore(redis, keys);
    await load(user, [], null);
    for (let from = 0; from < 10_500; from += 1_500) {
      await lists.apply(
        "like",
        user,
        Array.from({ length: 1_500 }, (_, i) => change(BigInt(from + i + 1), true, BigInt(from + i + 1))),
        false,
      );
    }
    const list = keys.list("like", user);
    expect(await redis.hlen(list.recent)).toBeLessThanOrEqual(10_000);
    expect(await redis.zcard(list.entries)).toBeLessThanOrEqual(100);
    expect(await lists.read("like", user)).toBeNull();
  });

  it("when a change is not committed yet, then its record outlives the two minutes, and once every record is committed they expire two minutes later", async () => {
    const user = nextUser++;
    const lists = createListStore(redis, keys);
    const recent = keys.list("like", user).recent;
    await lists.apply("like", user, [change(8n, true, 70n), change(9n, true, 71n)], false);
    expect(await redis.pttl(recent)).toBeGreaterThan(86_000_000);
    // One of the two committed: the other still holds the records open.
    await lists.apply("like", user, [change(8n, true, 70n)], true);
    expect(await redis.pttl(recent)).toBeGreaterThan(86_000_000);
    await lists.apply("like", user, [change(9n, true, 71n)], true);
    expect(await redis.pttl(recent)).toBeLessThanOrEqual(120_000);
    // A newer change from the API opens them again; its commit (arriving twice) closes them.
    await lists.apply("like", user, [change(9n, false, 80n)], false);
    expect(await redis.pttl(recent)).toBeGreaterThan(86_000_000);
    await lists.apply("like", user, [change(9n, false, 80n)], true);
    await lists.apply("like", user, [change(9n, false, 80n)], true);
    expect(await redis.pttl(recent)).toBeLessThanOrEqual(120_000);
    expect([...(await lists.recent("like", user)).keys()].sort()).toEqual([8n, 9n]);
  });

  it("when the records overflow, then those of committed changes go and those PostgreSQL may lack stay", async () => {
    const user = nextUser++;
    const lists = createListStore(redis, keys);
    await load(user, [], null);
    for (let from = 0; from < 9_990; from += 1_998) {
      await lists.apply(
        "like",
        user,
        Array.from({ length: 1_998 }, (_, i) => change(BigInt(from + i + 1), true, BigInt(from + i + 1))),
        true,
      );
    }
    // Unlikes PostgreSQL has not committed yet, then more committed changes than the hash may hold.
    await lists.apply("like", user, [change(3n, false, 20_000n), change(4n, false, 20_001n)], false);
    await lists.apply(
      "like",
      user,
      Array.from({ length: 100 }, (_, i) => change(BigInt(30_000 + i), true, BigInt(30_000 + i))),
      true,
    );
    const recent = await lists.recent("like", user);
    expect(recent.get(3n)).toEqual({ member: false, at: at(20_000) });
    expect(recent.get(4n)).toEqual({ member: false, at: at(20_001) });
    expect(recent.size).toBeLessThan(200);
    expect(await redis.hlen(keys.list("like", user).recent)).toBeLessThanOrEqual(10_000);
    expect(await lists.read("like", user)).toBeNull();
  });

  it("when a list is held, then its horizon expires a minute before its entries, and reads keep both", async () => {
    const user = nextUser++;
    const lists = createListStore(redis, keys);
    await load(user, [{ targetId: 1n, at: at(1) }], null);
    const list = keys.list("like", user);
    const [horizonTtl, entriesTtl] = await Promise.all([redis.pttl(list.horizon), redis.pttl(list.entries)]);
    expect(horizonTtl).toBeGreaterThan(86_000_000);
    expect(entriesTtl - horizonTtl).toBeGreaterThan(59_000);
    await redis.pexpire(list.horizon, 5_000);
    await lists.read("like", user);
    expect(await redis.pttl(list.horizon)).toBeGreaterThan(86_000_000);
  });
});
