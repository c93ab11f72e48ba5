import { describe, expect, it } from "vitest";
import { KnownUsers } from "../../../src/domain/known-users.js";

/** A small deterministic generator (mulberry32), so a failing order can be replayed. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** How many runs of consecutive ids a set of ids makes. */
function runsOf(ids: ReadonlySet<number>): number {
  return [...ids].filter((id) => !ids.has(id - 1)).length;
}

describe("known users", () => {
  it("when nothing was added, then no id is known and it is not loaded", () => {
    const known = new KnownUsers();
    expect(known.has(1n)).toBe(false);
    expect(known.runs).toBe(0);
    expect(known.ids).toBe(0);
    expect(known.loaded).toBe(false);
  });

  it("when ids arrive in ascending order without gaps, then they make one run holding exactly them", () => {
    const known = new KnownUsers(1);
    for (let id = 100n; id <= 1_099n; id++) known.add(id);
    expect(known.runs).toBe(1);
    expect(known.ids).toBe(1_000);
    expect([99n, 100n, 555n, 1_099n, 1_100n].map((id) => known.has(id))).toEqual([false, true, true, true, false]);
  });

  it("when a new highest id leaves a gap, then it starts a run, and the id that fills the gap merges the two", () => {
    const known = new KnownUsers();
    known.addRuns([{ first: 1n, last: 10n }]);
    known.add(12n);
    expect(known.runs).toBe(2);
    expect(known.has(11n)).toBe(false);
    known.add(11n);
    expect(known.runs).toBe(1);
    expect(known.ids).toBe(12);
  });

  it("when ids arrive below, between and inside runs, then each joins its neighbours or stands alone, and repeats change nothing", () => {
    const known = new KnownUsers();
    known.addRuns([
      { first: 100n, last: 199n },
      { first: 300n, last: 399n },
    ]);
    known.add(5n);
    known.add(250n);
    known.add(150n);
    known.add(99n);
    known.add(200n);
    expect(known.runs).toBe(4);
    expect([4n, 5n, 6n, 98n, 99n, 200n, 201n, 249n, 250n, 251n, 299n, 300n].map((id) => known.has(id))).toEqual([
      false,
      true,
      false,
      false,
      true,
      true,
      false,
      false,
      true,
      false,
      false,
      true,
    ]);
    expect(known.ids).toBe(1 + 102 + 1 + 100);
  });

  it("when a run overlaps several runs held, then they become one run covering all of them", () => {
    const known = new KnownUsers();
    known.addRuns([
      { first: 10n, last: 19n },
      { first: 30n, last: 39n },
      { first: 50n, last: 59n },
      { first: 70n, last: 79n },
    ]);
    known.addRuns([{ first: 20n, last: 55n }]);
    expect(known.runs).toBe(2);
    expect(known.has(10n) && known.has(45n) && known.has(59n) && known.has(70n)).toBe(true);
    expect(known.has(60n) || known.has(9n)).toBe(false);
    expect(known.ids).toBe(50 + 10);
  });

  it("when thousands of ids arrive in random order, singly and in runs, then it answers exactly as a set of them and holds one entry per run", () => {
    const next = random(7);
    const expected = new Set<number>();
    const known = new KnownUsers(1);
    for (let i = 0; i < 5_000; i++) {
      const first = 1 + Math.floor(next() * 20_000);
      const length = next() < 0.8 ? 1 : 1 + Math.floor(next() * 50);
      known.addRuns([{ first: BigInt(first), last: BigInt(first + length - 1) }]);
      for (let id = first; id < first + length; id++) expected.add(id);
    }
    for (let id = 0; id <= 20_060; id++) {
      if (known.has(BigInt(id)) !== expected.has(id)) throw new Error(`id ${id}: known ${known.has(BigInt(id))}, expected ${expected.has(id)}`);
    }
    expect(known.ids).toBe(expected.size);
    expect(known.runs).toBe(runsOf(expected));
  });

  it("when an id is zero, negative or beyond what a double holds exactly, then it is never held, so the caller asks PostgreSQL", () => {
    const known = new KnownUsers();
    known.addRuns([{ first: -5n, last: 2n ** 60n }]);
    known.add(0n);
    known.add(2n ** 62n);
    expect(known.runs).toBe(1);
    expect([0n, -1n, 1n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 62n].map((id) => known.has(id))).toEqual([false, false, true, true, false, false]);
  });

  it("when a run ends before it starts, then adding it fails with a sentence naming the run", () => {
    expect(() => new KnownUsers().addRuns([{ first: 5n, last: 3n }])).toThrow("got 5..3");
  });
});
