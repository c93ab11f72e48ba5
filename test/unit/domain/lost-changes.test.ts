// What an API process does with the changes it acknowledged when Redis may have
// lost them: appends to PostgreSQL what it lacks, as connections close and once a
// failover settles, and reports only what PostgreSQL did not take.
import { describe, expect, it } from "vitest";
import { AcknowledgedChanges, type AcknowledgedChange } from "../../../src/domain/acknowledged-changes.js";
import { createLostChangeCheck, type LostChangeDeps } from "../../../src/domain/lost-changes.js";
import type { RelationChange, Target } from "../../../src/domain/model/index.js";
import { RedisFollowUpError } from "../../../src/domain/persistence.js";

const post = (id: bigint): Target => ({ type: "post", id });
const pairKey = (c: { target: Target; relation: string; userId: bigint }) => `${c.target.id}:${c.relation}:${c.userId}`;

/** PostgreSQL as a map of pair versions; `failures` makes the next persists throw. */
function world(clock: { now: number }) {
  const journal = new AcknowledgedChanges(100, 60_000, () => clock.now);
  const postgres = new Map<string, bigint>();
  const persisted: RelationChange[][] = [];
  const failures: Error[] = [];
  const told = { appended: [] as string[], lost: [] as AcknowledgedChange[], followUpFailures: 0 };
  const deps: LostChangeDeps = {
    journal,
    versions: { newest: async (pairs) => pairs.map((p) => postgres.get(pairKey(p)) ?? null) },
    redisHolds: async (changes) => changes.map(() => false),
    authors: async (targets) => targets.map((t) => t.id * 100n),
    async persist(changes) {
      const failure = failures.shift();
      if (failure && !(failure instanceof RedisFollowUpError)) throw failure;
      persisted.push([...changes]);
      const passed = changes.filter((c) => (postgres.get(pairKey(c)) ?? -1n) < c.version);
      for (const c of passed) postgres.set(pairKey(c), c.version);
      if (failure) throw failure;
      return { passed };
    },
    recentMs: 3_000,
    onAppended: (changes, reason) => told.appended.push(`${reason}:${changes.map((c) => c.userId).join(",")}`),
    onLost: (changes) => told.lost.push(...changes),
    onFollowUpFailure: () => told.followUpFailures++,
    followUpMs: 5_000,
  };
  return { journal, postgres, persisted, failures, told, deps };
}

const like = (target: Target, userId: bigint, version: bigint) => ({ target, relation: "like" as const, userId, member: true, version });

describe("the changes a failover may take back", () => {
  it("when a connection closes, then what was acknowledged just before and PostgreSQL lacks is appended, with its author", async () => {
    const clock = { now: 10_000 };
    const w = world(clock);
    w.journal.record(like(post(1n), 1n, 5n)); // older than the window: the pipeline had its time
    clock.now += 4_000;
    w.journal.record(like(post(1n), 2n, 6n));
    w.journal.record(like(post(2n), 3n, 7n));
    w.postgres.set(pairKey(like(post(2n), 3n, 7n)), 7n); // already persisted
    const check = createLostChangeCheck(w.deps);
    await check.appendRecent(clock.now);
    expect(w.persisted.flat().map((c) => [c.userId, c.version, c.authorId, c.member])).toEqual([[2n, 6n, 100n, true]]);
    expect(check.appended()).toBe(1);
    expect(w.told.appended).toEqual(["connection:2"]);
  });

  it("when connections close together, then one append runs at a time and the last moment asked is covered", async () => {
    const clock = { now: 10_000 };
    const w = world(clock);
    w.journal.record(like(post(1n), 1n, 1n));
    const check = createLostChangeCheck(w.deps);
    const first = check.appendRecent(clock.now);
    clock.now += 1;
    w.journal.record(like(post(1n), 2n, 2n));
    const second = check.appendRecent(clock.now);
    await Promise.all([first, second]);
    expect(w.persisted.map((batch) => batch.map((c) => c.userId))).toEqual([[1n], [2n]]);
  });

  it("when an append fails while connections close, then the moments asked meanwhile are still covered, from the earliest's window", async () => {
    const clock = { now: 10_000 };
    const w = world(clock);
    w.journal.record(like(post(1n), 1n, 1n));
    w.failures.push(new Error("PostgreSQL is busy"));
    const check = createLostChangeCheck(w.deps);
    const first = check.appendRecent(clock.now);
    clock.now += 5_000;
    w.journal.record(like(post(1n), 2n, 2n));
    const second = check.appendRecent(clock.now);
    await expect(first).rejects.toThrow("PostgreSQL is busy");
    await expect(second).rejects.toThrow("PostgreSQL is busy");
    // The second moment's window reaches back to the first's: the change the failed append missed goes too.
    expect(w.persisted.flat().map((c) => c.userId)).toEqual([1n, 2n]);
  });

  it("when the pipeline committed a change meanwhile, then it is not counted as appended", async () => {
    const clock = { now: 10_000 };
    const w = world(clock);
    w.journal.record(like(post(1n), 1n, 4n));
    const check = createLostChangeCheck({
      ...w.deps,
      // PostgreSQL took the pipeline's copy between the question and the append.
      persist: async (changes) => {
        for (const c of changes) w.postgres.set(pairKey(c), c.version);
        return { passed: [] };
      },
    });
    await check.appendRecent(clock.now);
    expect(check.appended()).toBe(0);
    expect(w.told.appended).toEqual([]);
  });

  it("when PostgreSQL refuses the append after a failover, then the changes are reported lost with their pairs", async () => {
    const clock = { now: 10_000 };
    const w = world(clock);
    w.journal.record(like(post(1n), 1n, 1n));
    w.failures.push(new Error("PostgreSQL is down"));
    const check = createLostChangeCheck(w.deps);
    await check.check(clock.now + 1);
    expect(check.lost()).toBe(1);
    expect(w.told.lost.map((c) => c.userId)).toEqual([1n]);
    expect(check.appended()).toBe(0);
  });

  it("when a connection closes and PostgreSQL refuses, then the failure is thrown and nothing is counted lost yet", async () => {
    const clock = { now: 10_000 };
    const w = world(clock);
    w.journal.record(like(post(1n), 1n, 1n));
    w.failures.push(new Error("PostgreSQL is down"));
    const check = createLostChangeCheck(w.deps);
    await expect(check.appendRecent(clock.now)).rejects.toThrow("PostgreSQL is down");
    expect(check.lost()).toBe(0);
  });

  it("when PostgreSQL commits but Redis does not follow, then the changes count as appended and the follow-up is tried again", async () => {
    const clock = { now: 10_000 };
    const w = world(clock);
    w.journal.record(like(post(1n), 1n, 1n));
    w.failures.push(new RedisFollowUpError(new Error("Redis is failing over")));
    const check = createLostChangeCheck({ ...w.deps, followUpMs: 5_000 });
    await check.appendRecent(clock.now);
    expect(check.appended()).toBe(1);
    await expect.poll(() => w.persisted.length, { timeout: 3_000 }).toBe(2);
    check.close();
  });

  it("when a failover settles, then changes Redis's target still holds are left to the pipeline", async () => {
    const clock = { now: 10_000 };
    const w = world(clock);
    w.journal.record(like(post(1n), 1n, 1n));
    w.journal.record(like(post(2n), 2n, 2n));
    const check = createLostChangeCheck({ ...w.deps, redisHolds: async (changes) => changes.map((c) => c.target.id === 1n) });
    await check.check(clock.now + 1);
    expect(w.persisted.flat().map((c) => c.userId)).toEqual([2n]);
    expect(w.told.appended).toEqual(["failover:2"]);
  });
});
