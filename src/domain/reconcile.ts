// What a reconcile pass compares, and the repairs it asks for.
//
// Redis is authoritative for the targets it holds, PostgreSQL for the others. A
// target is compared only when quiescent: the newest change Redis made to it
// is the newest PostgreSQL applied. Otherwise changes are in flight and the
// pipeline, not a repair, will bring the stores together.
import type { DatabaseCount, DatabaseTarget, DifferenceKind, RedisTarget, Repair } from "./model.js";

export interface Comparison {
  readonly inFlight: boolean;
  readonly differences: Partial<Record<DifferenceKind, number>>;
  readonly repairs: Repair[];
}

/** Compares a target Redis holds with PostgreSQL (Redis authoritative). */
export function compareHeld(held: RedisTarget, persisted: DatabaseTarget): Comparison {
  if (held.version !== persisted.version) return { inFlight: true, differences: {}, repairs: [] };
  const differences: Partial<Record<DifferenceKind, number>> = {};
  const repairs: Repair[] = [];
  if (held.count !== held.members.length) {
    differences.redisCounter = 1;
    repairs.push({ kind: "recountRedis", target: held.target, observedVersion: held.version });
  }
  const inDatabase = new Set(persisted.members);
  const inRedis = new Set(held.members);
  const add = held.members.filter((m) => !inDatabase.has(m));
  const remove = persisted.members.filter((m) => !inRedis.has(m));
  if (add.length) differences.missingInDatabase = add.length;
  if (remove.length) differences.strayInDatabase = remove.length;
  const countWrong = persisted.count !== persisted.members.length;
  if (countWrong) differences.databaseCounter = 1;
  if (add.length || remove.length || countWrong) {
    repairs.push({ kind: "alignDatabase", target: held.target, observedVersion: held.version, add, remove });
  }
  return { inFlight: false, differences, repairs };
}

/** Compares a target only PostgreSQL holds: its counter must count its rows. */
export function compareUnheld(persisted: DatabaseCount): Repair | null {
  return persisted.count === persisted.rows ? null : { kind: "recountDatabase", target: persisted.target };
}
