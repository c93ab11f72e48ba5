import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LikeableTarget, Target, TargetSnapshot } from "../../../../src/domain/model/index.js";
import type { RebuildStore } from "../../../../src/domain/ports/index.js";
import type { RedisClient } from "../../../../src/stores/redis/client.js";
import { parseCounterHash } from "../../../../src/stores/redis/counter-hash.js";
import { createCounterStore } from "../../../../src/stores/redis/counter-store.js";
import { createRedisKeys } from "../../../../src/stores/redis/keys.js";
import { createMemberIndexStore, memberIndexesOf, type MemberIndexes } from "../../../../src/stores/redis/member-index-store.js";
import { createMembershipStore } from "../../../../src/stores/redis/membership-store.js";
import { createRebuildStore } from "../../../../src/stores/redis/rebuild-store.js";
import { rebuildGeneration } from "../../../../src/stores/redis/rebuild-write.js";
import { versionOf } from "../../../../src/stores/versions.js";
import { openRedis } from "../../../support/env.js";

let redis: RedisClient;
const keys = createRedisKeys(1024);
let nextId = BigInt(Date.now()) * 1000n + 500n;

/** A snapshot of likers `members` (and the rest empty) at `version`, opening `epoch`. */
const snapshot = (members: bigint[], version: bigint, epoch: bigint, more: Partial<TargetSnapshot> = {}): TargetSnapshot => ({
  members: { like: members },
  counts: {},
  seqs: {},
  viewTotals: [],
  version,
  epoch,
  mark: "100:100:",
  ...more,
});

/** Writes a snapshot under the target's rebuild lock, taken with this file's own token. */
async function writeLocked(store: RebuildStore, target: Target, written: TargetSnapshot, authorId: bigint | null) {
  const token = (await store.lock(target, 10_000, "rebuild-store-test")) as string;
  return store.write(target, written, authorId, token);
}

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
    const collectors = [14n, 27n];
    const written = snapshot(members, 77n, 3n, { members: { like: members, collect: collectors }, counts: { comment: 4, read: 12 }, seqs: { comment: 6n } });
    expect(await writeLocked(store, target, written, 9n)).toBe("written");
    expect(await writeLocked(store, target, snapshot([], 1n, 4n), 9n)).toBe("held");
    const hash = parseCounterHash(await redis.hgetall(keys.counters(target)));
    // The rebuilt target starts its epoch: its version is the epoch's first.
    expect(hash).toMatchObject({
      counts: { like: 3_000, collect: 2, comment: 4, read: 12 },
      authorId: 9n,
      version: versionOf(3n, 0n),
      generations: { like: rebuildGeneration(members, 64), collect: 0 },
      seqs: { comment: 6n },
    });
    const memberships = createMembershipStore(redis, keys);
    expect(await memberships.holds("like", [target, target], 14n)).toEqual([true, true]);
    expect(await memberships.holds("collect", [target], 27n)).toEqual([true]);
    expect(await memberships.holds("collect", [target], 1n)).toEqual([false]);
  });

  it("when a target is rebuilt and a like replayed into it, then the member indexes that exist and the replayed liker's note it", async () => {
    const target: LikeableTarget = { type: "post", id: nextId++ };
    const [loading, without, late] = [nextId++, nextId++, nextId++];
    const indexes = memberIndexesOf(redis, keys) as MemberIndexes;
    // An index being loaded exists: a rebuild between its read of PostgreSQL and its completion notes the target in it.
    await createMemberIndexStore(redis, indexes).begin("like", "post", loading);
    const store = createRebuildStore(redis, keys);
    await writeLocked(store, target, snapshot([loading, without], 10n, 2n), null);
    expect(await redis.sismember(indexes.key("like", "post", loading), target.id.toString())).toBe(1);
    // No index is made for a member who has none: its load reads PostgreSQL, which holds the membership.
    expect(await redis.exists(indexes.key("like", "post", without))).toBe(0);
    // A like made before the rebuild and replayed into it is noted as its add was, in case Redis lost that note.
    const before = versionOf(1n, BigInt(Date.now()) * 1000n);
    expect(await store.replay({ relation: "like", target, userId: late, member: true, version: before, intoEpoch: 2n })).toBe("replayed");
    expect(await redis.sismember(indexes.key("like", "post", late), target.id.toString())).toBe(1);
  });

  it("when a user is rebuilt, then its followers are found and followers counts them", async () => {
    const user: Target = { type: "user", id: nextId++ };
    const store = createRebuildStore(redis, keys);
    expect(
      await writeLocked(
        store,
        user,
        snapshot([], 0n, 1n, { members: { follow: [3n, 4n, 5n] }, counts: { following: 2, posts: 1 }, seqs: { following: 3n, posts: 1n } }),
        null,
      ),
    ).toBe("written");
    expect(parseCounterHash(await redis.hgetall(keys.counters(user)))).toMatchObject({
      counts: { followers: 3, following: 2, posts: 1 },
      seqs: { following: 3n, posts: 1n },
    });
    expect(await createMembershipStore(redis, keys).holds("follow", [user, user], 4n)).toEqual([true, true]);
  });

  it("when late changes of one user are replayed out of order, then the newest wins and the target's version stays its epoch's", async () => {
    const target: LikeableTarget = { type: "post", id: nextId++ };
    const store = createRebuildStore(redis, keys);
    await writeLocked(store, target, snapshot([5n], 10n, 2n), null);
    expect((await store.rebuilds([target]))[0]?.rebuild).toEqual({ epoch: 2n, epochStart: versionOf(2n, 0n), mark: "100:100:" });
    // Made before the rebuild (epoch 1), by a clock far ahead of the rebuilding Redis's.
    const ahead = BigInt(Date.now() + 3_600_000) * 1000n;
    const older = versionOf(1n, ahead);
    const newer = versionOf(1n, ahead + 1_000n);
    expect(await store.replay({ relation: "like", target, userId: 5n, member: false, version: newer, intoEpoch: 2n })).toBe("replayed");
    expect(await store.replay({ relation: "like", target, userId: 5n, member: true, version: older, intoEpoch: 2n })).toBe("unchanged");
    // Another relation's record is its own: the same user's late collect replays.
    expect(await store.replay({ relation: "collect", target, userId: 5n, member: true, version: older, intoEpoch: 2n })).toBe("replayed");
    expect(parseCounterHash(await redis.hgetall(keys.counters(target)))).toMatchObject({ counts: { like: 0, collect: 1 }, version: versionOf(2n, 0n) });
    // A change Redis made itself after the rebuild is newer than any late one, whatever the clocks said.
    await createMembershipStore(redis, keys).add("like", target, 6n);
    expect(await store.replay({ relation: "like", target, userId: 6n, member: false, version: newer, intoEpoch: 2n })).toBe("unchanged");
    expect((await createCounterStore(redis, keys).read([target]))[0]?.like).toBe(1);
    // Changes of the epoch itself or later are Redis's own: never replayed.
    expect(await store.replay({ relation: "like", target, userId: 7n, member: true, version: versionOf(2n, 5n), intoEpoch: 2n })).toBe("unchanged");
  });

  it("when likes and unlikes change nothing in a rebuild window, then they append and announce nothing; a late change of the other state then appends what the user was answered", async () => {
    const target: LikeableTarget = { type: "post", id: nextId++ };
    const store = createRebuildStore(redis, keys);
    const likes = createMembershipStore(redis, keys);
    await writeLocked(store, target, snapshot([5n], 10n, 2n), null);
    const events = async () =>
      (await redis.xrange(keys.outbox(target), "-", "+"))
        .map(([, fields]) => new Map(Array.from({ length: fields.length / 2 }, (_, i): [string, string] => [fields[2 * i] ?? "", fields[2 * i + 1] ?? ""])))
        .filter((e) => e.get("i") === target.id.toString())
        .map((e) => `${e.get("u")}:${e.get("s")}:${e.get("e")}`);
    const listener = await openRedis();
    const announced: string[] = [];
    listener.on("smessage", (channel: string) => announced.push(channel));
    await (listener as Redis).ssubscribe(keys.counters(target));
    try {
      // Answered from the rebuilt state: 5 likes it, 6 does not.
      expect(await likes.add("like", target, 5n)).toMatchObject({ changed: false });
      expect(await likes.remove("like", target, 6n)).toMatchObject({ changed: false });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await events()).toEqual([]);
      expect(announced).toEqual([]);
      // Late changes that PostgreSQL applied after the rebuild read it, contradicting both answers.
      const late = versionOf(1n, BigInt(Date.now()) * 1000n);
      expect(await store.replay({ relation: "like", target, userId: 5n, member: false, version: late, intoEpoch: 2n })).toBe("unchanged");
      expect(await store.replay({ relation: "like", target, userId: 6n, member: true, version: late, intoEpoch: 2n })).toBe("unchanged");
      // Redelivered, or agreeing with the answer: nothing more.
      expect(await store.replay({ relation: "like", target, userId: 5n, member: false, version: late, intoEpoch: 2n })).toBe("unchanged");
      expect(await events()).toEqual(["5:1:2", "6:0:2"]);
      expect(parseCounterHash(await redis.hgetall(keys.counters(target)))).toMatchObject({ counts: { like: 1 } });
    } finally {
      listener.disconnect();
    }
  });

  it("when late views of an earlier epoch are replayed, then a rebuilt post adds only what exceeds what it holds of that epoch", async () => {
    const target: Target = { type: "post", id: nextId++ };
    const store = createRebuildStore(redis, keys);
    // The snapshot held 30 views, 20 of them from epoch 1 (and PostgreSQL's views of epoch 1 were 20 then).
    await writeLocked(store, target, snapshot([], 10n, 2n, { counts: { read: 30 }, viewTotals: [{ epoch: 1n, total: 20 }] }), null);
    expect(await store.replayViews({ target, epoch: 1n, total: 18, intoEpoch: 2n })).toBe("unchanged");
    expect(await store.replayViews({ target, epoch: 1n, total: 26, intoEpoch: 2n })).toBe("replayed");
    expect(await store.replayViews({ target, epoch: 1n, total: 25, intoEpoch: 2n })).toBe("unchanged");
    expect(await store.replayViews({ target, epoch: 0n, total: 4, intoEpoch: 2n })).toBe("replayed");
    // Its own epoch's views, or a rebuild's that is not the latest, are never replayed.
    expect(await store.replayViews({ target, epoch: 2n, total: 9, intoEpoch: 2n })).toBe("unchanged");
    expect(await store.replayViews({ target, epoch: 1n, total: 90, intoEpoch: 3n })).toBe("unchanged");
    expect((await createCounterStore(redis, keys).read([target]))[0]?.read).toBe(30 + 6 + 4);
  });

  it("when a late change arrives after the rebuild window, then it is too late to replay and the target can be dropped whole", async () => {
    const target: LikeableTarget = { type: "post", id: nextId++ };
    const store = createRebuildStore(redis, keys);
    await writeLocked(store, target, snapshot([5n], 10n, 2n), null);
    // Rebuilt two hours ago, as far as the window can tell.
    await redis.hset(keys.counters(target), "rb", String((BigInt(Date.now()) - 7_200_000n) * 1000n));
    expect(await store.replay({ relation: "like", target, userId: 8n, member: true, version: versionOf(1n, 5n), intoEpoch: 2n })).toBe("tooLate");
    expect(await store.replayViews({ target, epoch: 1n, total: 5, intoEpoch: 2n })).toBe("tooLate");
    await createMembershipStore(redis, keys).add("like", target, 6n);
    // Unpersisted changes do not keep a drop from taking the target out (eviction would refuse).
    expect(await store.evict(target, versionOf(2n, 0n))).toBe("kept");
    expect(await store.drop(target)).toBe("evicted");
    expect((await createCounterStore(redis, keys).read([target]))[0]).toBeNull();
  });

  it("when more users change a rebuilt target than its record of them may hold, then the record stays under the key bound and an unknown late change is too late", async () => {
    const target: LikeableTarget = { type: "post", id: nextId++ };
    const store = createRebuildStore(redis, keys);
    const likes = createMembershipStore(redis, keys);
    await writeLocked(store, target, snapshot([], 0n, 2n), null);
    for (let u = 1; u <= 10_500; u += 500) {
      await Promise.all(Array.from({ length: 500 }, (_, i) => likes.add("like", target, BigInt(u + i))));
    }
    expect(await redis.hlen(keys.touched(target, "like"))).toBeLessThanOrEqual(10_000);
    // A user noted early: its late change is superseded. One never noted: too late to tell.
    expect(await store.replay({ relation: "like", target, userId: 1n, member: false, version: versionOf(1n, 5n), intoEpoch: 2n })).toBe("unchanged");
    expect(await store.replay({ relation: "like", target, userId: 10_400n, member: false, version: versionOf(1n, 5n), intoEpoch: 2n })).toBe("tooLate");
    expect((await createCounterStore(redis, keys).read([target]))[0]?.like).toBe(10_500);
  });
});
