import { describe, expect, it } from "vitest";
import { parseCounterHash } from "../../../../src/stores/redis/counter-hash.js";
import { createRedisKeys, membershipFanout, membershipGenerations, mix32 } from "../../../../src/stores/redis/keys.js";

const tagOf = (key: string) => /\{([^}]*)\}/.exec(key)?.[1];

describe("Redis keys", () => {
  const keys = createRedisKeys(1024);

  it("when keys are built for one target, then they all carry the same hash tag", () => {
    const target = { type: "post", id: 123456n } as const;
    const all = [keys.counters(target), ...keys.memberShards(target, 42n), ...keys.generationShards(target, 2)];
    expect(new Set(all.map(tagOf))).toEqual(new Set([String(123456 % 1024)]));
    expect(keys.memberShards(target, 42n)).toHaveLength(membershipGenerations);
  });

  it("when a user's shard is picked in each generation, then it lies in that generation's shard range", () => {
    const target = { type: "comment", id: 9n } as const;
    for (let g = 0; g < membershipGenerations; g++) {
      const shard = Number(keys.memberShard(target, 777n, g).split(":").at(-1));
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
    expect(parseCounterHash(["like", "3", "gen", "2", "author", "17", "comment", "1"])).toEqual({
      counts: { like: 3, comment: 1 },
      generation: 2,
      authorId: 17n,
      version: 0n,
    });
    expect(parseCounterHash({ like: "0", ver: "12", rb: "9" })).toEqual({ counts: { like: 0 }, generation: 0, authorId: null, version: 12n });
  });

  it("when a counter hash key is parsed, then it names the likeable target it was built for, and nothing else", () => {
    for (const target of [{ type: "post", id: 123456n }, { type: "comment", id: 9_223_372_036_854_775_807n }] as const) {
      expect(keys.parseLikeableCounters(keys.counters(target))).toEqual(target);
    }
    expect(keys.parseLikeableCounters(keys.counters({ type: "user", id: 5n }))).toBeNull();
    expect(keys.parseLikeableCounters(keys.outboxOf(3))).toBeNull();
    expect(keys.parseLikeableCounters("cnt:{1}:post:01")).toBeNull();
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
