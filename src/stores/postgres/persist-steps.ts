// The steps of a persist batch's transaction (persist-store.ts sequences
// them and states their lock order): relation versions, relation rows, counters
// and credits. Views (view-totals.ts) and like buckets (like-buckets.ts) have their own.
import {
  relationNames,
  relations,
  type CommittedChange,
  type CounterDelta,
  type CounterName,
  type CounterValue,
  type Relation,
  type RelationChange,
  type Target,
  type TargetType,
} from "../../domain/model/index.js";
import type { Database } from "./database.js";
import { selectCounters, toCounterValue, upsertCounters, type CounterRow } from "./counter-sql.js";
import { relationTables } from "./relation-tables.js";

export type Transaction = Parameters<Parameters<Database["$transaction"]>[0]>[0];

export const compareIds = (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0);

/** The order a batch's relation changes are written in, and so their rows locked in. */
export const inPairOrder = (a: RelationChange, b: RelationChange) =>
  a.target.type.localeCompare(b.target.type) || compareIds(a.target.id, b.target.id) || a.relation.localeCompare(b.relation) || compareIds(a.userId, b.userId);

const pairKey = (type: string, id: string, relation: string, user: string) => `${type}:${id}:${relation}:${user}`;
const keyOf = (c: RelationChange) => pairKey(c.target.type, c.target.id.toString(), c.relation, c.userId.toString());

/** A batch's relation changes by (target, relation, user): at most one each. */
export type ChangesByPair = ReadonlyMap<string, RelationChange>;

export const changesByPair = (changes: readonly RelationChange[]): ChangesByPair => new Map(changes.map((c) => [keyOf(c), c]));

interface AdvancedRow {
  target_type: string;
  target_id: string;
  relation: string;
  user_id: string;
  member: boolean;
  txid: string | null;
}

/**
 * Records each change as its pair's newest where it is newer than what PostgreSQL
 * holds. `passed` are the changes that advanced; `current` adds those an earlier
 * delivery applied, still their pair's newest.
 */
export async function advanceVersions(
  tx: Transaction,
  changes: readonly RelationChange[],
  byPair: ChangesByPair,
): Promise<{ passed: RelationChange[]; current: CommittedChange[] }> {
  const advanced = changes.length
    ? await tx.$queryRaw<AdvancedRow[]>`
        INSERT INTO relation_versions (target_type, target_id, relation, user_id, version, member, txid)
        SELECT *, pg_current_xact_id()::text::bigint FROM unnest(
          ${changes.map((c) => c.target.type)}::text[],
          ${changes.map((c) => c.target.id.toString())}::text[]::bigint[],
          ${changes.map((c) => c.relation)}::text[],
          ${changes.map((c) => c.userId.toString())}::text[]::bigint[],
          ${changes.map((c) => c.version.toString())}::text[]::numeric[],
          ${changes.map((c) => c.member)}::boolean[])
        ON CONFLICT (target_type, target_id, relation, user_id) DO UPDATE
          SET version = EXCLUDED.version, member = EXCLUDED.member, txid = EXCLUDED.txid
          WHERE relation_versions.version < EXCLUDED.version
        RETURNING target_type, target_id::text AS target_id, relation, user_id::text AS user_id, member, txid::text AS txid`
    : [];
  const rowKey = (row: AdvancedRow) => pairKey(row.target_type, row.target_id, row.relation, row.user_id);
  const passed = advanced.map((row) => byPair.get(rowKey(row)) as RelationChange);
  // Changes an earlier delivery applied are still their pair's newest when the row holds
  // their version: a redelivery after a failure past the commit must replay them too.
  const advancedKeys = new Set(advanced.map(rowKey));
  const repeated = changes.filter((c) => !advancedKeys.has(keyOf(c)));
  const standing = repeated.length
    ? await tx.$queryRaw<AdvancedRow[]>`
        SELECT v.target_type, v.target_id::text AS target_id, v.relation, v.user_id::text AS user_id, v.member, v.txid::text AS txid
        FROM relation_versions v JOIN unnest(
          ${repeated.map((c) => c.target.type)}::text[],
          ${repeated.map((c) => c.target.id.toString())}::text[]::bigint[],
          ${repeated.map((c) => c.relation)}::text[],
          ${repeated.map((c) => c.userId.toString())}::text[]::bigint[],
          ${repeated.map((c) => c.version.toString())}::text[]::numeric[]) AS c(target_type, target_id, relation, user_id, version)
        ON v.target_type = c.target_type AND v.target_id = c.target_id AND v.relation = c.relation AND v.user_id = c.user_id AND v.version = c.version
        WHERE v.txid IS NOT NULL`
    : [];
  const current: CommittedChange[] = [...advanced, ...standing].map((row) => ({
    change: byPair.get(rowKey(row)) as RelationChange,
    txid: BigInt(row.txid ?? "0"),
  }));
  return { passed, current };
}

/** A row a relation statement inserted (sign 1) or deleted (sign -1). */
export interface MovedRow {
  readonly relation: Relation;
  readonly sign: 1 | -1;
  readonly row: { target_type: string; target_id: string; user_id: string; created_at: Date };
}

/** Inserts the rows of the passed joins and deletes those of the passed leaves, relation by relation; answers the rows really moved. */
export async function moveRows(tx: Transaction, passed: readonly RelationChange[]): Promise<MovedRow[]> {
  const moved: MovedRow[] = [];
  for (const relation of relationNames) {
    const t = relationTables[relation];
    const joins = passed.filter((c) => c.relation === relation && c.member);
    const leaves = passed.filter((c) => c.relation === relation && !c.member);
    if (joins.length) {
      const rows = await tx.$queryRaw<MovedRow["row"][]>`
        INSERT INTO ${t.table} AS l (${t.insertColumns})
        SELECT ${t.insertValues} FROM unnest(
          ${joins.map((c) => c.target.type)}::text[],
          ${joins.map((c) => c.target.id.toString())}::text[]::bigint[],
          ${joins.map((c) => c.userId.toString())}::text[]::bigint[],
          ${joins.map((c) => c.at.toISOString())}::text[]::timestamptz[]) AS k(target_type, target_id, user_id, created_at)
        ON CONFLICT DO NOTHING
        RETURNING ${t.targetType("l")} AS target_type, ${t.targetId("l")}::text AS target_id, ${t.userId("l")}::text AS user_id, l.created_at`;
      moved.push(...rows.map((row) => ({ relation, sign: 1 as const, row })));
    }
    if (leaves.length) {
      const rows = await tx.$queryRaw<MovedRow["row"][]>`
        DELETE FROM ${t.table} l
        USING unnest(
          ${leaves.map((c) => c.target.type)}::text[],
          ${leaves.map((c) => c.target.id.toString())}::text[]::bigint[],
          ${leaves.map((c) => c.userId.toString())}::text[]::bigint[]) AS d(target_type, target_id, user_id)
        WHERE ${t.targetType("l")} = d.target_type AND ${t.targetId("l")} = d.target_id AND ${t.userId("l")} = d.user_id
        RETURNING ${t.targetType("l")} AS target_type, ${t.targetId("l")}::text AS target_id, ${t.userId("l")}::text AS user_id, l.created_at`;
      moved.push(...rows.map((row) => ({ relation, sign: -1 as const, row })));
    }
  }
  return moved;
}

/** The counter deltas a batch gathers, one per (target, counter). */
export interface CounterTally {
  readonly add: (target: Target, name: CounterName, delta: number) => void;
  /** The deltas that move their counter, in the order their rows are locked in. */
  readonly moved: () => CounterDelta[];
}

function createCounterTally(): CounterTally {
  const deltas = new Map<string, CounterDelta>();
  return {
    add: (target, name, delta) => {
      const k = `${target.type}:${target.id}:${name}`;
      deltas.set(k, { target, name, delta: (deltas.get(k)?.delta ?? 0) + delta });
    },
    moved: () =>
      [...deltas]
        .filter(([, d]) => d.delta !== 0)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([, d]) => d),
  };
}

/** Counts each moved row on its target's relation counter and on the counter of whom it credits. */
export function countMoves(moved: readonly MovedRow[], byPair: ChangesByPair): CounterTally {
  const tally = createCounterTally();
  for (const { relation, sign, row } of moved) {
    const { counter, credit } = relations[relation];
    const target: Target = { type: row.target_type as TargetType, id: BigInt(row.target_id) };
    tally.add(target, counter, sign);
    const credited = credit.to === "member" ? BigInt(row.user_id) : byPair.get(pairKey(row.target_type, row.target_id, relation, row.user_id))?.authorId;
    if (credited) tally.add({ type: "user", id: credited }, credit.name, sign);
  }
  return tally;
}

/** Adds the deltas to their counters; answers the counter rows as they stand after. */
export async function moveCounters(tx: Transaction, deltas: readonly CounterDelta[]): Promise<CounterRow[]> {
  return deltas.length ? await tx.$queryRaw<CounterRow[]>(upsertCounters(deltas)) : [];
}

/** The credited counters of everyone the batch's changes credit, moved now or by an earlier delivery: Redis mirrors them as they stand. */
export async function readCredits(tx: Transaction, current: readonly CommittedChange[]): Promise<CounterValue[]> {
  const creditedNames = new Map<string, { target: Target; name: CounterName }>();
  for (const { change } of current) {
    const { credit } = relations[change.relation];
    const user = credit.to === "member" ? change.userId : change.authorId;
    if (user !== null) creditedNames.set(`${user}:${credit.name}`, { target: { type: "user", id: user }, name: credit.name });
  }
  return creditedNames.size ? (await tx.$queryRaw<CounterRow[]>(selectCounters([...creditedNames.values()]))).map(toCounterValue) : [];
}
