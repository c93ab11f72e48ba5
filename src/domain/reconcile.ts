// What a reconcile pass compares, and the repairs it asks for.
//
// Redis is authoritative for the memberships and views of the targets it holds,
// PostgreSQL for the others, and for the counters it derives from its own rows
// (comments, replies, posts, credits), which Redis only mirrors. A target is
// compared only when quiescent: the newest change Redis made to it is the newest
// PostgreSQL applied. When Redis is ahead, changes are in flight and the
// pipeline, not a repair, will bring the stores together. When Redis is behind,
// it lacks changes PostgreSQL applied (a failover lost replicated writes): Redis
// is no authority then, and the target must be rebuilt from PostgreSQL rather
// than PostgreSQL repaired from it. A failover can also lose a change and let a
// later one through, so the versions agree again: PostgreSQL's record of each
// pair it differs on tells (lostInRedis).
import {
  derivedCounters,
  type CounterName,
  type CounterSurvey,
  type DatabaseTarget,
  type DifferenceKind,
  type ListPosition,
  type PairRecord,
  type Relation,
  type RedisTarget,
  type Repair,
  type Target,
} from "./model/index.js";
import { isOlder } from "./lists.js";

/** Passes in a row a target may be seen in flight at the same versions before it counts as stuck. */
export const stuckAfterPasses = 3;

export type VersionStanding = "quiescent" | "inFlight" | "redisBehind";

/**
 * Where Redis stands against PostgreSQL for one target; the one place versions are compared.
 * Sound only when PostgreSQL's version was read before Redis's: every change PostgreSQL
 * applied was made in Redis first, so a later read of Redis holds every change the earlier
 * read of PostgreSQL saw, unless Redis lost it. Read the other way round, a change made
 * and persisted between the two reads looks like Redis lagging.
 */
export function compareVersions(redisVersion: bigint, databaseVersion: bigint): VersionStanding {
  // -1: the target changed while Redis was read.
  if (redisVersion < 0n || redisVersion > databaseVersion) return "inFlight";
  return redisVersion === databaseVersion ? "quiescent" : "redisBehind";
}

export interface Comparison {
  readonly standing: VersionStanding;
  readonly differences: Partial<Record<DifferenceKind, number>>;
  readonly repairs: Repair[];
}

/** Users one store holds as members of a target's relation and the other does not. */
export interface MemberDifferences {
  /** Members in Redis that PostgreSQL has no row of. */
  readonly add: readonly bigint[];
  /** Rows in PostgreSQL of users Redis does not hold. */
  readonly remove: readonly bigint[];
}

/** Counter differences of a quiescent relation, from its member counts on both sides. */
export function compareCounts(held: RedisTarget, persisted: DatabaseTarget): Pick<Comparison, "differences" | "repairs"> {
  const differences: Partial<Record<DifferenceKind, number>> = {};
  const repairs: Repair[] = [];
  if (held.count !== held.memberCount) {
    differences.redisCounter = 1;
    repairs.push({ kind: "recountRedis", relation: held.relation, target: held.target, observedVersion: held.version });
  }
  if (persisted.count !== persisted.rows) differences.databaseCounter = 1;
  return { differences, repairs };
}

/**
 * Compares a target's relation Redis holds with PostgreSQL (Redis authoritative),
 * both loaded whole. Targets too big to load are walked in pieces by the pass instead.
 */
export function compareHeld(held: RedisTarget, persisted: DatabaseTarget, maxPerRepair: number): Comparison & { readonly differing: MemberDifferences } {
  const standing = compareVersions(held.version, persisted.version);
  if (standing !== "quiescent" || held.members === null || persisted.members === null)
    return { standing, differences: {}, repairs: [], differing: { add: [], remove: [] } };
  const { differences, repairs } = compareCounts(held, persisted);
  const inDatabase = new Set(persisted.members);
  const inRedis = new Set(held.members);
  const add = held.members.filter((m) => !inDatabase.has(m));
  const remove = persisted.members.filter((m) => !inRedis.has(m));
  if (add.length) differences.missingInDatabase = add.length;
  if (remove.length) differences.strayInDatabase = remove.length;
  repairs.push(...alignDatabase(held.relation, held.target, held.version, add, remove, differences.databaseCounter === 1, maxPerRepair));
  return { standing, differences, repairs, differing: { add, remove } };
}

/**
 * Whether the members a quiescent target differs on show Redis lost a change
 * PostgreSQL applied. Redis makes every change before PostgreSQL applies it, so a
 * pair whose newest applied change left it as PostgreSQL's rows have it (a row and
 * a join, no row and a leave) was changed so in Redis too: Redis holding otherwise
 * lost that change (a failover), and a later change of the target hid the loss
 * from the versions. Repairing PostgreSQL from that Redis would delete a persisted
 * membership, or restore one a persisted leave ended, that no newer acknowledged
 * change touched; the target is rebuilt from PostgreSQL instead. A difference with
 * no such record (a row no change wrote, a row a change's record disagrees with)
 * is PostgreSQL's drift and is repaired. A record newer than the comparison is a
 * change made since, which the repair's gate leaves alone.
 */
export function lostInRedis(differing: MemberDifferences, records: ReadonlyMap<bigint, PairRecord>, observedVersion: bigint): boolean {
  const vouches = (user: bigint, member: boolean) => {
    const record = records.get(user);
    return record !== undefined && record.member === member && record.version <= observedVersion;
  };
  return differing.remove.some((user) => vouches(user, true)) || differing.add.some((user) => vouches(user, false));
}

/**
 * The repairs that make PostgreSQL's members of a target's relation `add` more
 * and `remove` fewer, at most `maxPerRepair` users per message so no message (nor
 * the transaction applying it) grows with the target. Each one recounts the
 * counter, so `recount` alone still yields one repair.
 */
export function alignDatabase(
  relation: Relation,
  target: Target,
  observedVersion: bigint,
  add: readonly bigint[],
  remove: readonly bigint[],
  recount: boolean,
  maxPerRepair: number,
): Repair[] {
  const repairs: Repair[] = [];
  for (let i = 0; i < add.length; i += maxPerRepair) {
    repairs.push({ kind: "alignDatabase", relation, target, observedVersion, add: add.slice(i, i + maxPerRepair), remove: [] });
  }
  for (let i = 0; i < remove.length; i += maxPerRepair) {
    repairs.push({ kind: "alignDatabase", relation, target, observedVersion, add: [], remove: remove.slice(i, i + maxPerRepair) });
  }
  if (repairs.length === 0 && recount) repairs.push({ kind: "alignDatabase", relation, target, observedVersion, add: [], remove: [] });
  return repairs;
}

/** Compares a relation only PostgreSQL holds: its counter must count its rows. */
export function compareUnheld(persisted: { relation: Relation; target: Target; count: number; rows: number }): Repair | null {
  return persisted.count === persisted.rows ? null : { kind: "recountDatabase", relation: persisted.relation, target: persisted.target };
}

/** What compareCounters found, and the derived counters Redis holds an older write of. */
export interface CounterComparison extends Pick<Comparison, "differences" | "repairs"> {
  /**
   * Derived counters whose Redis value is of an older write (a lower sequence
   * number) than PostgreSQL's: usually a mirror on its way, which the pass looks
   * at again a moment later before repairing; after a crash between a commit and
   * its mirror, one that never comes.
   */
  readonly lagging: readonly CounterName[];
}

/**
 * Compares a target's other counters. A derived counter row that does not count
 * PostgreSQL's rows is recounted (and the recount mirrored into Redis); one Redis
 * holds otherwise than PostgreSQL for the same write is mirrored again, which its
 * sequence number keeps from undoing a newer value. A post's
 * views at rest in both stores take Redis's value.
 */
export function compareCounters(survey: CounterSurvey): CounterComparison {
  const { target } = survey;
  const differences: Partial<Record<DifferenceKind, number>> = {};
  const repairs: Repair[] = [];
  const names = derivedCounters[target.type] as readonly CounterName[];
  const recount = names.filter((name) => (survey.truth[name] ?? 0) !== (survey.database[name]?.value ?? 0));
  if (recount.length > 0) {
    differences.derivedCounter = recount.length;
    repairs.push({ kind: "recountDerived", target, names: recount });
  }
  const lagging: CounterName[] = [];
  if (survey.redis) {
    const redis = survey.redis;
    const mirror: CounterName[] = [];
    for (const name of names) {
      if (recount.includes(name)) continue;
      const held = redis[name] ?? { value: 0, seq: 0n };
      const persisted = survey.database[name] ?? { value: 0, seq: 0n };
      // A later write than the one PostgreSQL's snapshot saw: it moved on since, nothing to compare.
      if (held.seq < persisted.seq) lagging.push(name);
      else if (held.seq === persisted.seq && held.value !== persisted.value) mirror.push(name);
    }
    if (mirror.length > 0) {
      differences.redisDerivedCounter = mirror.length;
      repairs.push({ kind: "mirrorDerived", target, names: mirror });
    }
    const views = redis.read?.value ?? 0;
    if (
      target.type === "post" &&
      compareVersions(survey.redisVersion, survey.databaseVersion) === "quiescent" &&
      views !== (survey.database.read?.value ?? 0)
    ) {
      differences.views = 1;
      repairs.push({ kind: "alignViews", target, observedVersion: survey.databaseVersion, views });
    }
  }
  return { differences, repairs, lagging };
}

/**
 * Of counters found lagging, those Redis still holds an older write of when
 * looked at again: their mirror is not coming, so they are mirrored now.
 */
export function stillLagging(survey: CounterSurvey, lagging: readonly CounterName[]): Repair | null {
  const redis = survey.redis;
  if (!redis) return null;
  const behind = lagging.filter((name) => (redis[name]?.seq ?? 0n) < (survey.database[name]?.seq ?? 0n));
  return behind.length > 0 ? { kind: "mirrorDerived", target: survey.target, names: behind } : null;
}

/**
 * The posts a user's list in Redis lists otherwise than PostgreSQL's rows: past
 * its horizon, the list must hold exactly the rows there, at the same times (at
 * or before it, pages read PostgreSQL). `newest` are PostgreSQL's newest `limit`
 * rows, read before the list: when all of them lie past the horizon, PostgreSQL
 * may have more there, and only as far back as the oldest row read is compared.
 * A post the list keeps a record of a recent change for is the caller's to leave
 * out: the record speaks for it, PostgreSQL may not hold that change yet.
 */
export function compareList(
  held: { readonly entries: readonly ListPosition[]; readonly horizon: ListPosition | null },
  newest: readonly ListPosition[],
  limit: number,
): bigint[] {
  const { horizon } = held;
  const oldestRead = newest.at(-1);
  const pastHorizon = (p: ListPosition) => horizon === null || isOlder(horizon, p);
  const floor = newest.length >= limit && oldestRead !== undefined && pastHorizon(oldestRead) ? oldestRead : null;
  const compared = (p: ListPosition) => pastHorizon(p) && (floor === null || !isOlder(p, floor));
  const persisted = new Map(newest.filter(compared).map((p) => [p.targetId, p.at.getTime()]));
  const listed = new Map(held.entries.filter(compared).map((p) => [p.targetId, p.at.getTime()]));
  const differing = [...listed].flatMap(([id, at]) => (persisted.get(id) === at ? [] : [id]));
  for (const id of persisted.keys()) if (!listed.has(id)) differing.push(id);
  return differing;
}
