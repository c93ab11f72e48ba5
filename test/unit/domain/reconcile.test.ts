import { describe, expect, it } from "vitest";
import type { ListPosition, PairRecord } from "../../../src/domain/model/index.js";
import { compareList, compareVersions, lostInRedis } from "../../../src/domain/reconcile.js";

const records = (entries: [bigint, PairRecord][]) => new Map(entries);

describe("what Redis and PostgreSQL differ on", () => {
  it("when PostgreSQL applied a join of a user Redis does not hold, then Redis lost it", () => {
    expect(lostInRedis({ add: [], remove: [7n] }, records([[7n, { member: true, version: 90n }]]), 100n)).toBe(true);
  });

  it("when PostgreSQL applied a leave of a user Redis holds, then Redis lost it", () => {
    expect(lostInRedis({ add: [7n], remove: [] }, records([[7n, { member: false, version: 90n }]]), 100n)).toBe(true);
  });

  it("when a row no change wrote, or one its pair's record contradicts, differs, then PostgreSQL drifted", () => {
    expect(lostInRedis({ add: [], remove: [7n] }, records([]), 100n)).toBe(false);
    expect(lostInRedis({ add: [], remove: [7n] }, records([[7n, { member: false, version: 90n }]]), 100n)).toBe(false);
    expect(lostInRedis({ add: [7n], remove: [] }, records([]), 100n)).toBe(false);
    expect(lostInRedis({ add: [7n], remove: [] }, records([[7n, { member: true, version: 90n }]]), 100n)).toBe(false);
  });

  it("when the pair's record is newer than the comparison, then it changed since and tells nothing", () => {
    expect(lostInRedis({ add: [], remove: [7n] }, records([[7n, { member: true, version: 101n }]]), 100n)).toBe(false);
  });

  it("when versions are compared, then Redis ahead is in flight, equal is quiescent, behind is behind", () => {
    expect(compareVersions(101n, 100n)).toBe("inFlight");
    expect(compareVersions(-1n, 100n)).toBe("inFlight");
    expect(compareVersions(100n, 100n)).toBe("quiescent");
    expect(compareVersions(99n, 100n)).toBe("redisBehind");
  });
});

const at = (ms: number, targetId: bigint): ListPosition => ({ at: new Date(ms), targetId });

describe("a user's list against PostgreSQL's rows", () => {
  it("when the list holds exactly the rows past its horizon, then nothing differs, whatever lies before it", () => {
    const rows = [at(50, 5n), at(40, 4n), at(30, 3n), at(20, 2n)];
    expect(compareList({ entries: [at(50, 5n), at(40, 4n)], horizon: at(30, 3n) }, rows, 10)).toEqual([]);
  });

  it("when the list lacks a row, lists a post without one or at another time, then those posts differ", () => {
    const rows = [at(50, 5n), at(40, 4n), at(35, 6n)];
    expect(compareList({ entries: [at(50, 5n), at(45, 4n), at(38, 7n)], horizon: null }, rows, 10).sort()).toEqual([4n, 6n, 7n]);
  });

  it("when PostgreSQL has more rows past the horizon than were read, then only as far back as the oldest read is compared", () => {
    const rows = [at(50, 5n), at(40, 4n)];
    expect(compareList({ entries: [at(50, 5n), at(40, 4n), at(30, 3n)], horizon: at(10, 1n) }, rows, 2)).toEqual([]);
    expect(compareList({ entries: [at(50, 5n)], horizon: at(10, 1n) }, rows, 2)).toEqual([4n]);
  });
});
