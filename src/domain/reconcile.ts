// What a reconcile pass compares, and the repairs it asks for.
//
// Redis is authoritative for the targets it holds, PostgreSQL for the others. A
// target is compared only when quiescent: the newest change Redis made to it
// is the newest PostgreSQL applied. When Redis is ahead, changes are in flight
// and the pipeline, not a repair, will bring the stores together. When Redis is
// behind, it lacks changes PostgreSQL applied (a failover lost replicated
// writes): Redis is no authority then, and the target must be rebuilt from
// PostgreSQL rather than PostgreSQL repaired from it.
import type { DatabaseTarget, DifferenceKind, LikeableTarget, RedisTarget, Repair } from "./model.js";

/** Passes in a row a target may be seen in flight at the same versions before it counts as stuck. */
export const stuckAfterPasses = 3;

export type VersionStanding = "quiescent" | "inFlight" | "redisBehind";

/** Where Redis stands against PostgreSQL for one target; the one place versions are compared. */
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

/** Counter differences of a quiescent target, from its member counts on both sides. */
export function compareCounts(held: RedisTarget, persisted: DatabaseTarget): Pick<Comparison, "differences" | "repairs"> {
  const differences: Partial<Record<DifferenceKind, number>> = {};
  const repairs: Repair[] = [];
  if (held.count !== held.memberCount) {
    differences.redisCounter = 1;
    repairs.push({ kind: "recountRedis", target: held.target, observedVersion: held.version });
  }
  if (persisted.count !== persisted.rows) differences.databaseCounter = 1;
  return { differences, repairs };
}

/**
 * Compares a target Redis holds with PostgreSQL (Redis authoritative), both
 * loaded whole. Targets too big to load are walked in pieces by the pass instead.
 */
export function compareHeld(held: RedisTarget, persisted: DatabaseTarget, maxPerRepair: number): Comparison {
  const standing = compareVersions(held.version, persisted.version);
  if (standing !== "quiescent" || held.members === null || persisted.members === null) return { standing, differences: {}, repairs: [] };
  const { differences, repairs } = compareCounts(held, persisted);
  const inDatabase = new Set(persisted.members);
  const inRedis = new Set(held.members);
  const add = held.members.filter((m) => !inDatabase.has(m));
  const remove = persisted.members.filter((m) => !inRedis.has(m));
  if (add.length) differences.missingInDatabase = add.length;
  if (remove.length) differences.strayInDatabase = remove.length;
  repairs.push(...alignDatabase(held.target, held.version, add, remove, differences.databaseCounter === 1, maxPerRepair));
  return { standing, differences, repairs };
}

/**
 * The repairs that make PostgreSQL's likes of a target `add` more and `remove`
 * fewer, at most `maxPerRepair` users per message so no message (nor the
 * transaction applying it) grows with the target. Each one recounts the
 * counter, so `recount` alone still yields one repair.
 */
export function alignDatabase(
  target: LikeableTarget,
  observedVersion: bigint,
  add: readonly bigint[],
  remove: readonly bigint[],
  recount: boolean,
  maxPerRepair: number,
): Repair[] {
  const repairs: Repair[] = [];
  for (let i = 0; i < add.length; i += maxPerRepair) {
    repairs.push({ kind: "alignDatabase", target, observedVersion, add: add.slice(i, i + maxPerRepair), remove: [] });
  }
  for (let i = 0; i < remove.length; i += maxPerRepair) {
    repairs.push({ kind: "alignDatabase", target, observedVersion, add: [], remove: remove.slice(i, i + maxPerRepair) });
  }
  if (repairs.length === 0 && recount) repairs.push({ kind: "alignDatabase", target, observedVersion, add: [], remove: [] });
  return repairs;
}

/** Compares a target only PostgreSQL holds: its counter must count its rows. */
export function compareUnheld(persisted: { target: LikeableTarget; count: number; rows: number }): Repair | null {
  return persisted.count === persisted.rows ? null : { kind: "recountDatabase", target: persisted.target };
}
