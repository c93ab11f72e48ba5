// The writers' fence over member indexes: while processes of two protocols (two
// versions noting likes in indexes differently) write, no index completes and none
// answers; an index completed before answers nothing after, as the other version
// may not have noted in it; once one protocol runs, indexes complete again.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { RedisClient } from "../../../../src/stores/redis/client.js";
import { memberIndexProtocol, startIndexFence, type IndexFence } from "../../../../src/stores/redis/index-fence.js";
import { createRedisKeys } from "../../../../src/stores/redis/keys.js";
import { createMemberIndexLookup, createMemberIndexStore, memberIndexesOf, type MemberIndexes } from "../../../../src/stores/redis/member-index-store.js";
import { ScriptStatus } from "../../../../src/stores/redis/statuses.js";
import { emptyRedis, openRedis, testConfig } from "../../../support/env.js";

const keys = createRedisKeys(testConfig().redisPartitions);
const quick = { renewMs: 100, leaseMs: 400, quietMs: 300 };
const opened: { client: RedisClient; fence: IndexFence | null }[] = [];

/** A process's client and its fence, of `protocol`. */
async function processOf(protocol: number, options: { quietMs?: number } = {}) {
  const client = await openRedis();
  const fence = await startIndexFence(client, keys.writers(), { protocol, ...quick, ...options });
  opened.push({ client, fence });
  const indexes = memberIndexesOf(client, keys) as MemberIndexes;
  const store = createMemberIndexStore(client, indexes);
  const lookup = createMemberIndexLookup(client, indexes);
  return {
    client,
    fence: fence as IndexFence,
    indexes,
    /** Loads the user's index of likes with `liked` (as from PostgreSQL); whether it completed under the generation this process knows. */
    async load(user: bigint, liked: bigint[]) {
      await store.begin("like", "post", user);
      await store.complete("like", "post", user, liked, false);
      const key = indexes.key("like", "post", user);
      return (await client.indexRulesOut(key, indexes.generation(), "1"))[0] === ScriptStatus.Applied;
    },
    rulesOut: (user: bigint, targets: bigint[]) => lookup.rulesOut("like", "post", user, targets),
  };
}

// Each test from an empty registry: no quiet time or generation left by the one before.
beforeEach(async () => {
  const redis = await openRedis();
  await emptyRedis(redis);
  await redis.quit();
});

afterEach(async () => {
  for (const { client, fence } of opened.splice(0)) {
    await fence?.close();
    await client.quit();
  }
});

describe("the writers' fence over member indexes", () => {
  it("when a process of another protocol starts, then no index completes or answers until it leaves, and those completed before stay unused", async () => {
    // A quiet time long enough to be seen before it ends.
    const current = await processOf(memberIndexProtocol, { quietMs: 2_000 });
    const [before, during, after] = [9_100_000_001n, 9_100_000_002n, 9_100_000_003n];
    expect(await current.load(before, [1n, 2n])).toBe(true);
    expect(await current.rulesOut(before, [1n, 3n])).toEqual([false, true]);
    const generation = current.fence.generation();

    // It waits a renewal before it may write, by when the current process has learned of it.
    const other = await processOf(memberIndexProtocol + 1, { quietMs: 2_000 });
    expect(current.fence.open()).toBe(false);
    expect(other.fence.open()).toBe(false);
    expect(current.fence.generation()).toBeGreaterThan(generation);
    expect(await current.rulesOut(before, [1n, 3n])).toBeNull();
    expect(await current.load(during, [1n])).toBe(false);
    expect(await other.load(during, [1n])).toBe(false);

    await other.fence.close();
    expect(other.fence.open()).toBe(false);
    expect(await other.rulesOut(before, [1n, 3n])).toBeNull();
    await expect.poll(() => current.fence.open(), { timeout: 5_000 }).toBe(true);
    // Completed under the generation before: it rules nothing out until loaded again, once the
    // quiet time for the last likes of the version that left has passed.
    expect(await current.rulesOut(before, [1n, 3n])).toBeNull();
    expect(await current.load(before, [1n, 2n])).toBe(false);
    await expect.poll(() => current.load(before, [1n, 2n]), { timeout: 5_000 }).toBe(true);
    expect(await current.rulesOut(before, [1n, 3n])).toEqual([false, true]);
    expect(await current.load(after, [])).toBe(true);
  });

  it("when a version comes back after another ran alone, then the generation moves again and it trusts none of the other's indexes", async () => {
    const user = 9_100_000_031n;
    const first = await processOf(memberIndexProtocol);
    const other = await processOf(memberIndexProtocol + 1);
    await first.fence.close();
    await expect.poll(() => other.load(user, [1n]), { timeout: 5_000 }).toBe(true);
    const generation = other.fence.generation();
    const back = await processOf(memberIndexProtocol);
    expect(back.fence.generation()).toBeGreaterThan(generation);
    expect(other.fence.generation()).toBe(back.fence.generation());
    await other.fence.close();
    await expect.poll(() => back.fence.open(), { timeout: 5_000 }).toBe(true);
    expect(await back.rulesOut(user, [1n, 2n])).toBeNull();
  });

  it("when processes of the same protocol start and stop, then the generation stays and their indexes keep answering", async () => {
    const first = await processOf(memberIndexProtocol);
    expect(await first.load(9_100_000_011n, [5n])).toBe(true);
    const generation = first.fence.generation();
    const second = await processOf(memberIndexProtocol);
    expect(second.fence.generation()).toBe(generation);
    await second.fence.close();
    expect(first.fence.open()).toBe(true);
    expect(await second.rulesOut(9_100_000_011n, [5n, 6n])).toBeNull();
    expect(await first.rulesOut(9_100_000_011n, [5n, 6n])).toEqual([false, true]);
  });

  it("when a process cannot renew within its lease, then its indexes answer nothing until it does", async () => {
    const alone = await processOf(memberIndexProtocol);
    expect(await alone.load(9_100_000_021n, [7n])).toBe(true);
    const other = await openRedis();
    try {
      // Its renewals refused for a while: another client pauses every client of Redis.
      await other.call("CLIENT", "PAUSE", "600", "ALL");
      await expect.poll(() => alone.fence.open(), { timeout: 5_000 }).toBe(false);
      await expect.poll(() => alone.fence.open(), { timeout: 5_000 }).toBe(true);
      expect(await alone.rulesOut(9_100_000_021n, [7n, 8n])).toEqual([false, true]);
    } finally {
      await other.quit();
    }
  });
});
