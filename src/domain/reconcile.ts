// What a reconcile pass compares, and the repairs it asks for.
//
// Redis is authoritative for the targets it holds, PostgreSQL for the others. A
// target is compared only when quiescent: the newest change Redis made to it
// is the newest PostgreSQL applied. Otherwise changes are in flight and the
// pipeline, not a repair, will bring the stores together.
import { z } from "zod";
import type { Target } from "./targets.js";

/** A target as Redis holds it. */
export interface CachedTarget {
  readonly target: Target;
  readonly count: number;
  readonly members: readonly bigint[];
  readonly version: bigint;
}

/** A target as PostgreSQL holds it. */
export interface PersistedTarget {
  readonly count: number;
  readonly members: readonly bigint[];
  readonly version: bigint;
}

export type DifferenceKind = "missingInDatabase" | "strayInDatabase" | "databaseCounter" | "cacheCounter";

export type Compensation =
  | {
      /** Make PostgreSQL's likes of the target what Redis holds, then its counter their number. */
      readonly kind: "alignToCache";
      readonly target: Target;
      /** Redis's version when compared: a pair changed since is left alone. */
      readonly observedVersion: bigint;
      readonly add: readonly bigint[];
      readonly remove: readonly bigint[];
    }
  | {
      /** Set PostgreSQL's like counter of the target to its number of rows. */
      readonly kind: "recountDatabase";
      readonly target: Target;
    }
  | {
      /** Set Redis's like counter of the target to its number of members, if unchanged since. */
      readonly kind: "recountCache";
      readonly target: Target;
      readonly observedVersion: bigint;
    };

export interface CachedComparison {
  readonly inFlight: boolean;
  readonly differences: Partial<Record<DifferenceKind, number>>;
  readonly repairs: Compensation[];
}

/** Compares a target Redis holds with PostgreSQL (Redis authoritative). */
export function compareCached(cached: CachedTarget, persisted: PersistedTarget): CachedComparison {
  if (cached.version !== persisted.version) return { inFlight: true, differences: {}, repairs: [] };
  const differences: Partial<Record<DifferenceKind, number>> = {};
  const repairs: Compensation[] = [];
  if (cached.count !== cached.members.length) {
    differences.cacheCounter = 1;
    repairs.push({ kind: "recountCache", target: cached.target, observedVersion: cached.version });
  }
  const inDatabase = new Set(persisted.members);
  const inCache = new Set(cached.members);
  const add = cached.members.filter((m) => !inDatabase.has(m));
  const remove = persisted.members.filter((m) => !inCache.has(m));
  if (add.length) differences.missingInDatabase = add.length;
  if (remove.length) differences.strayInDatabase = remove.length;
  const countWrong = persisted.count !== persisted.members.length;
  if (countWrong) differences.databaseCounter = 1;
  if (add.length || remove.length || countWrong) {
    repairs.push({ kind: "alignToCache", target: cached.target, observedVersion: cached.version, add, remove });
  }
  return { inFlight: false, differences, repairs };
}

/** Compares a target only PostgreSQL holds: its counter must count its rows. */
export function compareUncached(target: Target, persisted: { count: number; rows: number }): Compensation | null {
  return persisted.count === persisted.rows ? null : { kind: "recountDatabase", target };
}

const decimal = z.string().regex(/^[0-9]{1,19}$/);
const targetSchema = z.object({ type: z.enum(["post", "comment"]), id: decimal });

/** The wire form of a compensation: JSON, ids as strings. */
export const compensationMessage = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("alignToCache"), target: targetSchema, observedVersion: decimal, add: z.array(decimal), remove: z.array(decimal) }),
  z.object({ kind: z.literal("recountDatabase"), target: targetSchema }),
  z.object({ kind: z.literal("recountCache"), target: targetSchema, observedVersion: decimal }),
]);

export function toCompensationMessage(c: Compensation): z.infer<typeof compensationMessage> {
  const target = { type: c.target.type as "post" | "comment", id: c.target.id.toString() };
  switch (c.kind) {
    case "alignToCache":
      return { kind: c.kind, target, observedVersion: c.observedVersion.toString(), add: c.add.map(String), remove: c.remove.map(String) };
    case "recountDatabase":
      return { kind: c.kind, target };
    case "recountCache":
      return { kind: c.kind, target, observedVersion: c.observedVersion.toString() };
  }
}

export function parseCompensation(body: unknown): { compensation: Compensation } | { invalid: string } {
  const parsed = compensationMessage.safeParse(typeof body === "string" || Buffer.isBuffer(body) ? safeJson(body.toString()) : body);
  if (!parsed.success) return { invalid: parsed.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; ") };
  const m = parsed.data;
  const target: Target = { type: m.target.type, id: BigInt(m.target.id) };
  switch (m.kind) {
    case "alignToCache":
      return { compensation: { kind: m.kind, target, observedVersion: BigInt(m.observedVersion), add: m.add.map(BigInt), remove: m.remove.map(BigInt) } };
    case "recountDatabase":
      return { compensation: { kind: m.kind, target } };
    case "recountCache":
      return { compensation: { kind: m.kind, target, observedVersion: BigInt(m.observedVersion) } };
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
