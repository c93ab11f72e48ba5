import { describe, expect, it } from "vitest";
import type { CounterSurvey, DatabaseTarget, PairRecord, RedisTarget, Target } from "../../../src/domain/model/index.js";
import type { DatabaseReconcileStore, RelationTarget } from "../../../src/domain/ports/index.js";
import { compareCounters, compareHeld, compareUnheld, stillLagging } from "../../../src/domain/reconcile.js";
import { redisLost } from "../../../src/pipeline/reconcile-walk.js";

const post: Target = { type: "post", id: 12n };
const user: Target = { type: "user", id: 3n };

/** A post's likers as Redis holds them, quiescent at version 100 and counted right unless told otherwise. */
const inRedis = (members: bigint[] | null, changes: Partial<RedisTarget> = {}): RedisTarget => ({
  relation: "like",
  target: post,
  count: members?.length ?? 0,
  members,
  memberCount: members?.length ?? 0,
  generations: [0],
  version: 100n,
  idleSeconds: 0,
  ...changes,
});

/** The same likers as PostgreSQL holds them, at version 100 and counted right unless told otherwise. */
const inPostgres = (members: bigint[] | null, changes: Partial<DatabaseTarget> = {}): DatabaseTarget => ({
  count: members?.length ?? 0,
  members,
  rows: members?.length ?? 0,
  version: 100n,
  ...changes,
});

describe("a relation Redis holds, against PostgreSQL", () => {
  it("when both hold the same members and count them right, then nothing differs and nothing is repaired", () => {
    const comparison = compareHeld(inRedis([1n, 2n]), inPostgres([2n, 1n]), 100);
    expect(comparison).toEqual({ standing: "quiescent", differences: {}, repairs: [], differing: { add: [], remove: [] } });
  });

  it("when PostgreSQL lacks a member Redis holds, then it is missing there and added at Redis's version", () => {
    const comparison = compareHeld(inRedis([1n, 2n, 3n]), inPostgres([1n, 2n], { count: 3 }), 100);
    expect(comparison.differences).toEqual({ missingInDatabase: 1, databaseCounter: 1 });
    expect(comparison.differing).toEqual({ add: [3n], remove: [] });
    expect(comparison.repairs).toEqual([{ kind: "alignDatabase", relation: "like", target: post, observedVersion: 100n, add: [3n], remove: [] }]);
  });

  it("when PostgreSQL has a row of a user Redis does not hold, then it is stray and removed", () => {
    const comparison = compareHeld(inRedis([1n]), inPostgres([1n, 9n]), 100);
    expect(comparison.differences).toEqual({ strayInDatabase: 1 });
    expect(comparison.differing).toEqual({ add: [], remove: [9n] });
    expect(comparison.repairs).toEqual([{ kind: "alignDatabase", relation: "like", target: post, observedVersion: 100n, add: [], remove: [9n] }]);
  });

  it("when Redis's counter does not count its members, then Redis is recounted if unchanged since", () => {
    const comparison = compareHeld(inRedis([1n, 2n], { count: 5 }), inPostgres([1n, 2n]), 100);
    expect(comparison.differences).toEqual({ redisCounter: 1 });
    expect(comparison.repairs).toEqual([{ kind: "recountRedis", relation: "like", target: post, observedVersion: 100n }]);
  });

  it("when only PostgreSQL's counter is wrong, then one repair with no members to move recounts it", () => {
    const comparison = compareHeld(inRedis([1n, 2n]), inPostgres([1n, 2n], { count: 7 }), 100);
    expect(comparison.differences).toEqual({ databaseCounter: 1 });
    expect(comparison.repairs).toEqual([{ kind: "alignDatabase", relation: "like", target: post, observedVersion: 100n, add: [], remove: [] }]);
  });

  it("when more members differ than one repair names, then the repairs are cut at that many users, additions before removals", () => {
    const comparison = compareHeld(inRedis([1n, 2n, 3n, 4n, 5n]), inPostgres([8n, 9n]), 2);
    expect(comparison.repairs.map((r) => (r.kind === "alignDatabase" ? [r.add, r.remove] : r.kind))).toEqual([
      [[1n, 2n], []],
      [[3n, 4n], []],
      [[5n], []],
      [[], [8n, 9n]],
    ]);
  });

  it("when the target changed while Redis was read (version -1), then it is in flight and left alone however its members differ", () => {
    const comparison = compareHeld(inRedis([1n, 2n], { version: -1n, count: 9 }), inPostgres([7n]), 100);
    expect(comparison).toEqual({ standing: "inFlight", differences: {}, repairs: [], differing: { add: [], remove: [] } });
  });

  it("when Redis is ahead of PostgreSQL, then it is in flight; when behind, Redis lacks changes: neither is repaired", () => {
    expect(compareHeld(inRedis([1n, 2n], { version: 101n }), inPostgres([1n]), 100)).toMatchObject({ standing: "inFlight", repairs: [] });
    expect(compareHeld(inRedis([1n], { version: 99n }), inPostgres([1n, 2n]), 100)).toMatchObject({ standing: "redisBehind", repairs: [] });
  });

  it("when either side was too big to load, then nothing is compared here (the pass walks it)", () => {
    expect(compareHeld(inRedis(null, { count: 5, memberCount: 5 }), inPostgres([1n]), 100)).toEqual({
      standing: "quiescent",
      differences: {},
      repairs: [],
      differing: { add: [], remove: [] },
    });
    expect(compareHeld(inRedis([1n]), inPostgres(null, { count: 3, rows: 2 }), 100)).toMatchObject({ differences: {}, repairs: [] });
  });
});

describe("a relation only PostgreSQL holds", () => {
  it("when its counter counts its rows, then nothing is repaired", () => {
    expect(compareUnheld({ relation: "follow", target: user, count: 4, rows: 4 })).toBeNull();
  });

  it("when its counter differs from its rows, then PostgreSQL's counter is recounted", () => {
    expect(compareUnheld({ relation: "follow", target: user, count: 5, rows: 4 })).toEqual({ kind: "recountDatabase", relation: "follow", target: user });
  });
});

const at = (value: number, seq: bigint) => ({ value, seq });

/** A post's counters as both stores hold them, at rest at version 100 and alike unless told otherwise. */
const counters = (changes: Partial<CounterSurvey> = {}): CounterSurvey => ({
  target: post,
  truth: { comment: 4 },
  database: { comment: at(4, 10n), read: at(30, 0n) },
  redis: { comment: at(4, 10n), read: at(30, 0n) },
  redisVersion: 100n,
  databaseVersion: 100n,
  ...changes,
});

describe("a target's other counters", () => {
  it("when every store agrees with PostgreSQL's rows, then nothing differs", () => {
    expect(compareCounters(counters())).toEqual({ differences: {}, repairs: [], lagging: [] });
  });

  it("when PostgreSQL's derived counter does not count its rows, then it is recounted, and not mirrored as it stands", () => {
    const comparison = compareCounters(counters({ truth: { comment: 5 }, redis: { comment: at(9, 10n), read: at(30, 0n) } }));
    expect(comparison.differences).toEqual({ derivedCounter: 1 });
    expect(comparison.repairs).toEqual([{ kind: "recountDerived", target: post, names: ["comment"] }]);
  });

  it("when PostgreSQL has no row for a derived counter its rows count, then it is recounted (an absent row reads 0)", () => {
    const comparison = compareCounters(counters({ database: { read: at(30, 0n) }, redis: null }));
    expect(comparison.repairs).toEqual([{ kind: "recountDerived", target: post, names: ["comment"] }]);
  });

  it("when Redis holds another value for the same write, then PostgreSQL's is mirrored into Redis again", () => {
    const comparison = compareCounters(counters({ redis: { comment: at(6, 10n), read: at(30, 0n) } }));
    expect(comparison.differences).toEqual({ redisDerivedCounter: 1 });
    expect(comparison.repairs).toEqual([{ kind: "mirrorDerived", target: post, names: ["comment"] }]);
  });

  it("when Redis holds an older write, then the counter is lagging, to be looked at again, not repaired yet", () => {
    const comparison = compareCounters(counters({ redis: { comment: at(3, 9n), read: at(30, 0n) } }));
    expect(comparison).toEqual({ differences: {}, repairs: [], lagging: ["comment"] });
  });

  it("when Redis holds a newer write than PostgreSQL's snapshot, then it moved on since and nothing is compared", () => {
    expect(compareCounters(counters({ redis: { comment: at(8, 11n), read: at(30, 0n) } }))).toEqual({ differences: {}, repairs: [], lagging: [] });
  });

  it("when a user's derived counters differ each their own way, then each is named in its repair", () => {
    const comparison = compareCounters({
      target: user,
      truth: { posts: 2, likesReceived: 7, following: 1 },
      database: { posts: at(3, 1n), likesReceived: at(7, 5n), following: at(1, 2n) },
      redis: { posts: at(3, 1n), likesReceived: at(6, 5n), following: at(0, 1n) },
      redisVersion: 100n,
      databaseVersion: 100n,
    });
    expect(comparison.differences).toEqual({ derivedCounter: 1, redisDerivedCounter: 1 });
    expect(comparison.repairs).toEqual([
      { kind: "recountDerived", target: user, names: ["posts"] },
      { kind: "mirrorDerived", target: user, names: ["likesReceived"] },
    ]);
    expect(comparison.lagging).toEqual(["following"]);
  });

  it("when a post at rest has other views in PostgreSQL than in Redis, then PostgreSQL takes Redis's at PostgreSQL's version", () => {
    const comparison = compareCounters(counters({ redis: { comment: at(4, 10n), read: at(35, 0n) } }));
    expect(comparison.differences).toEqual({ views: 1 });
    expect(comparison.repairs).toEqual([{ kind: "alignViews", target: post, observedVersion: 100n, views: 35 }]);
  });

  it("when a post's views differ while changes are in flight, or Redis's version is unknown, then views are left alone", () => {
    const views = { comment: at(4, 10n), read: at(35, 0n) };
    expect(compareCounters(counters({ redis: views, redisVersion: 101n })).repairs).toEqual([]);
    expect(compareCounters(counters({ redis: views, redisVersion: -1n })).repairs).toEqual([]);
  });

  it("when Redis does not hold the target, then only PostgreSQL's rows are compared: nothing is mirrored, no views taken", () => {
    const comparison = compareCounters(counters({ redis: null, database: { comment: at(4, 10n), read: at(99, 0n) } }));
    expect(comparison).toEqual({ differences: {}, repairs: [], lagging: [] });
  });
});

describe("lagging counters looked at again", () => {
  const lagging = counters({ redis: { comment: at(3, 9n) } });

  it("when Redis still holds the older write, then PostgreSQL's is mirrored: its mirror is not coming", () => {
    expect(stillLagging(lagging, ["comment"])).toEqual({ kind: "mirrorDerived", target: post, names: ["comment"] });
  });

  it("when the mirror arrived meanwhile, or Redis let the target go, then nothing is repaired", () => {
    expect(stillLagging({ ...lagging, redis: { comment: at(4, 10n) } }, ["comment"])).toBeNull();
    expect(stillLagging({ ...lagging, redis: null }, ["comment"])).toBeNull();
  });
});

describe("whether Redis lost what it differs on", () => {
  /** PostgreSQL's records of pairs, and the users each read asked about. */
  const recording = (records: [bigint, PairRecord][]) => {
    const asked: bigint[][] = [];
    const database: Pick<DatabaseReconcileStore, "pairRecords"> = {
      pairRecords: async (_item: RelationTarget, users: readonly bigint[]) => {
        asked.push([...users]);
        return new Map(records);
      },
    };
    return { database: database as DatabaseReconcileStore, asked };
  };
  const item: RelationTarget = { relation: "like", target: post };

  it("when no member differs, then PostgreSQL is not asked and nothing was lost", async () => {
    const { database, asked } = recording([[7n, { member: true, version: 90n }]]);
    expect(await redisLost(database, item, { add: [], remove: [] }, 100n)).toBe(false);
    expect(asked).toEqual([]);
  });

  it("when PostgreSQL applied the join of a stray member, then Redis lost it, found by one read of every differing user", async () => {
    const { database, asked } = recording([[7n, { member: true, version: 90n }]]);
    expect(await redisLost(database, item, { add: [4n], remove: [7n] }, 100n)).toBe(true);
    expect(asked).toEqual([[4n, 7n]]);
  });

  it("when no record vouches for what PostgreSQL holds, then PostgreSQL drifted and Redis lost nothing", async () => {
    const { database } = recording([[4n, { member: true, version: 90n }]]);
    expect(await redisLost(database, item, { add: [4n], remove: [7n] }, 100n)).toBe(false);
  });
});
