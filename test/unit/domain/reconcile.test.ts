import { describe, expect, it } from "vitest";
import type { PairRecord } from "../../../src/domain/model.js";
import { compareVersions, lostInRedis } from "../../../src/domain/reconcile.js";

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
