import { describe, expect, it } from "vitest";
import { parseCounterHash } from "../../../../src/stores/redis/counter-hash.js";
import { createRedisKeys, membershipFanout, membershipGenerations, mix32 } from "../../../../src/stores/redis/keys.js";

const tagOf = (key: string) => /\{([^}]*)\}/.exec(key)?.[1];

describe("Redis keys", () => {
  const keys = createRedisKeys(1024);

  it("when keys are built for one target, then they all carry the same hash tag", () => {
    const target = { type: "post", id: 123456n } as const;
    const all = [
      keys.counters(target),
      ...(["like", "collect"] as const).flatMap((r) => [...keys.memberShards(r, target, 42n), ...keys.generationShards(r, target, 2), keys.touched(target, r)]),
      keys.viewsReplayed(target),
      keys.outbox(target),
    ];
    expect(new Set(all.map(tagOf))).toEqual(new Set([String(123456 % 1024)]));
    expect(keys.memberShards("like", target, 42n)).toHaveLength(membershipGenerations);
    // Each relation's shards are its own.
    expect(keys.memberShard("like", target, 42n, 0)).not.toBe(keys.memberShard("collect", target, 42n, 0));
  });

  it("when a user's list keys are built, then they share the user's hash tag and differ per relation", () => {
    const like = keys.list("like", 5000n);
    const collect = keys.list("collect", 5000n);
    const user = keys.counters({ type: "user", id: 5000n });
    expect(new Set([...Object.values(like), ...Object.values(collect), user].map(tagOf))).toEqual(new Set([String(5000 % 1024)]));
    expect(new Set([...Object.values(like), ...Object.values(collect)]).size).toBe(8);
  });

  it("when a user's shard is picked in each generation, then it lies in that generation's shard range", () => {
    const target = { type: "comment", id: 9n } as const;
    for (let g = 0; g < membershipGenerations; g++) {
      const shard = Number(keys.memberShard("like", target, 777n, g).split(":").at(-1));
      expect(shard).toBeGreaterThanOrEqual(0);
      expect(shard).toBeLessThan(membershipFanout ** g);
    }
  });

  it("when sequential user ids are hashed, then they spread evenly over shards", () => {
    const buckets = new Array<number>(64).fill(0);
    for (let id = 1n; id <= 64_000n; id++) buckets[mix32(id) % 64]! += 1;
    expect(Math.max(...buckets)).toBeLessThan(1_000 * 1.15);
    expect(Math.min(...buckets)).toBeGreaterThan(1_000 * 0.85);
  });

  it("when a counter hash is parsed, then bookkeeping fields are kept apart from counts", () => {
    expect(parseCounterHash(["like", "3", "gen", "2", "gen:c", "1", "author", "17", "comment", "1", "s:comment", "4", "vt", "8", "read", "9"])).toEqual({
      counts: { like: 3, comment: 1, read: 9 },
      generations: { like: 2, collect: 1, follow: 0 },
      authorId: 17n,
      version: 0n,
      seqs: { comment: 4n },
    });
    expect(parseCounterHash({ like: "0", ver: "12", rb: "9" })).toEqual({
      counts: { like: 0 },
      generations: { like: 0, collect: 0, follow: 0 },
      authorId: null,
      version: 12n,
      seqs: {},
    });
  });

  it("when a counter hash key is parsed, then it names the target it was built for, and nothing else", () => {
    for (const target of [
      { type: "post", id: 123456n },
      { type: "comment", id: 9_223_372_036_854_775_807n },
      { type: "user", id: 5n },
    ] as const) {
      expect(keys.parseCounters(keys.counters(target))).toEqual(target);
    }
    expect(keys.parseCounters(keys.outboxOf(3))).toBeNull();
    expect(keys.parseCounters("cnt:{1}:post:01")).toBeNull();
    expect(keys.parseCounters(keys.list("like", 5n).entries)).toBeNull();
  });

  it("when a rate budget's key is built, then plain subjects stay readable and any other text is hashed out of the hash tag", () => {
    expect(keys.rateBudget("ipMutations", "2001:db8::1")).toBe("rl:{ipMutations:2001:db8::1}");
    expect(keys.rateBudget("userMutations", "42")).toBe("rl:{userMutations:42}");
    for (const subject of ["a}b{c", "nul\u0000name", "x".repeat(1000), "has space"]) {
      const key = keys.rateBudget("usernameLogins", subject);
      expect(key).toMatch(/^rl:\{usernameLogins:[A-Za-z0-9_-]{22}\}$/);
      expect(tagOf(key)).toBe(key.slice(4, -1));
    }
    expect(keys.rateBudget("usernameLogins", "a}b")).not.toBe(keys.rateBudget("usernameLogins", "a}c"));
  });
});
