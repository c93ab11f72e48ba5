// What a load of targets into Redis reads from PostgreSQL: many targets in one
// REPEATABLE READ snapshot, with a statement per relation and per kind of row
// whatever their number, and what committed to them after it.
import { Prisma } from "../../generated/prisma/client.js";
import {
  derivedCounters,
  isDerivedCounter,
  relationsOf,
  type CounterName,
  type Relation,
  type Target,
  type TargetSnapshot,
  type TargetType,
} from "../../domain/model/index.js";
import type { CommittedSince, SnapshotStore } from "../../domain/ports/index.js";
import { epochScale } from "../versions.js";
import type { Database } from "./database.js";
import { selectCounters, toCounterValue, type CounterRow } from "./counter-sql.js";
import { relationTables } from "./relation-tables.js";

/** The newest version PostgreSQL holds for a target: its newest applied change (any relation, or views). */
const newestChange = (target: Target) => Prisma.sql`
  GREATEST(
    (SELECT COALESCE(max(version), 0) FROM relation_versions WHERE target_type = ${target.type} AND target_id = ${target.id}),
    (SELECT COALESCE(max(version), 0) FROM view_totals WHERE target_type = ${target.type} AND target_id = ${target.id}))`;

/** `unnest` of the targets' types and ids as t(target_type, target_id). */
const targetsTable = (targets: readonly Target[]) => Prisma.sql`
  unnest(${targets.map((t) => t.type)}::text[], ${targets.map((t) => t.id.toString())}::text[]::bigint[]) AS t(target_type, target_id)`;

const keyOf = (type: string, id: string) => `${type}:${id}`;

/** Rows grouped by the target they belong to. */
function grouped<R extends { target_type?: string; target_id: string }>(rows: readonly R[], type?: string): Map<string, R[]> {
  const groups = new Map<string, R[]>();
  for (const row of rows) {
    const key = keyOf(row.target_type ?? type ?? "", row.target_id);
    const group = groups.get(key);
    if (group) group.push(row);
    else groups.set(key, [row]);
  }
  return groups;
}

/** The targets grouped by type, each group's ids as text. */
function byType(targets: readonly Target[]): Map<TargetType, string[]> {
  const groups = new Map<TargetType, string[]>();
  for (const t of targets) groups.set(t.type, [...(groups.get(t.type) ?? []), t.id.toString()]);
  return groups;
}

type Tx = Prisma.TransactionClient;

/** Every member of each target, per relation: one aggregated string a target, in one statement for every relation and type. */
async function readMembers(tx: Tx, targets: readonly Target[]): Promise<Map<string, Partial<Record<Relation, bigint[]>>>> {
  const members = new Map<string, Partial<Record<Relation, bigint[]>>>();
  const parts: Prisma.Sql[] = [];
  for (const [type, ids] of byType(targets)) {
    for (const relation of relationsOf(type)) {
      for (const id of ids) {
        const entry = members.get(keyOf(type, id)) ?? {};
        entry[relation] = [];
        members.set(keyOf(type, id), entry);
      }
      const t = relationTables[relation];
      // One aggregated string rather than a row object per member: a hot target has tens of thousands.
      parts.push(Prisma.sql`
        SELECT ${relation}::text AS relation, ${type}::text AS target_type, ${t.targetId("l")}::text AS target_id, string_agg(${t.userId("l")}::text, ',') AS users
        FROM ${t.table} l WHERE ${t.targetType("l")} = ${type} AND ${t.targetId("l")} = ANY(${ids}::text[]::bigint[])
        GROUP BY ${t.targetId("l")}`);
    }
  }
  if (parts.length === 0) return members;
  const rows = await tx.$queryRaw<{ relation: Relation; target_type: string; target_id: string; users: string }[]>(Prisma.join(parts, " UNION ALL "));
  for (const row of rows) {
    const entry = members.get(keyOf(row.target_type, row.target_id));
    if (entry) entry[row.relation] = row.users.split(",").map(BigInt);
  }
  return members;
}

/**
 * Each target's newest applied version, and a new epoch above every epoch PostgreSQL has
 * seen for it (changes still in flight carry at most the previous one: the new one outranks
 * them all), in one statement.
 */
async function newEpochs(tx: Tx, targets: readonly Target[]): Promise<Map<string, { version: bigint; epoch: bigint }>> {
  const rows = await tx.$queryRaw<{ target_type: string; target_id: string; version: string; epoch: string }[]>`
    WITH v AS (
      SELECT t.target_type, t.target_id, GREATEST(
        (SELECT COALESCE(max(version), 0) FROM relation_versions r WHERE r.target_type = t.target_type AND r.target_id = t.target_id),
        (SELECT COALESCE(max(version), 0) FROM view_totals w WHERE w.target_type = t.target_type AND w.target_id = t.target_id)) AS version
      FROM ${targetsTable(targets)}
    ), e AS (
      INSERT INTO target_epochs (target_type, target_id, epoch)
      SELECT target_type, target_id, floor(version / ${epochScale.toString()}::numeric)::bigint + 1 FROM v
      ON CONFLICT (target_type, target_id) DO UPDATE SET epoch = GREATEST(target_epochs.epoch + 1, EXCLUDED.epoch)
      RETURNING target_type, target_id, epoch
    )
    SELECT v.target_type, v.target_id::text AS target_id, v.version::text AS version, e.epoch::text AS epoch
    FROM v JOIN e ON e.target_type = v.target_type AND e.target_id = v.target_id`;
  return new Map(rows.map((row) => [keyOf(row.target_type, row.target_id), { version: BigInt(row.version), epoch: BigInt(row.epoch) }]));
}

/** The snapshots of `targets` (in order, repeats allowed) read in `tx`; `distinct` holds each once. */
async function readSnapshots(tx: Tx, targets: readonly Target[], distinct: readonly Target[]): Promise<TargetSnapshot[]> {
  // The transaction's snapshot, taken by its first statement: what it sees is exactly
  // what committed before, so changesSince can name what it does not see.
  const [{ mark } = { mark: "" }] = await tx.$queryRaw<{ mark: string }[]>`SELECT pg_current_snapshot()::text AS mark`;
  const members = await readMembers(tx, distinct);
  const counters = await tx.$queryRaw<CounterRow[]>`
    SELECT c.target_type, c.target_id::text AS target_id, c.name, c.value::text AS value, c.seq::text AS seq
    FROM ${targetsTable(distinct)} JOIN counters c ON c.target_type = t.target_type AND c.target_id = t.target_id`;
  const posts = distinct.filter((t) => t.type === "post");
  const viewTotals =
    posts.length > 0
      ? await tx.$queryRaw<{ target_id: string; epoch: string; total: string }[]>`
          SELECT target_id::text AS target_id, epoch::text, total::text FROM view_totals
          WHERE target_type = 'post' AND target_id = ANY(${posts.map((p) => p.id.toString())}::text[]::bigint[])`
      : [];
  const epochs = await newEpochs(tx, distinct);
  const countersOf = grouped(counters);
  const viewsOf = grouped(viewTotals, "post");
  return targets.map((target) => {
    const key = keyOf(target.type, target.id.toString());
    const own = countersOf.get(key) ?? [];
    const derived = own.filter((c) => isDerivedCounter(target.type, c.name));
    const { version, epoch } = epochs.get(key) ?? { version: 0n, epoch: 1n };
    return {
      members: members.get(key) ?? {},
      counts: Object.fromEntries(own.map((c) => [c.name, Number(c.value)])),
      seqs: Object.fromEntries(derived.map((c) => [c.name as CounterName, BigInt(c.seq)])),
      viewTotals: (viewsOf.get(key) ?? []).map((v) => ({ epoch: BigInt(v.epoch), total: Number(v.total) })),
      version,
      epoch,
      mark,
    };
  });
}

export function createSnapshotStore(db: Database): SnapshotStore {
  return {
    read(targets) {
      if (targets.length === 0) return Promise.resolve([]);
      const distinct = [...new Map(targets.map((t) => [keyOf(t.type, t.id.toString()), t])).values()];
      // One snapshot: members, counters and versions must describe the same moment.
      return db.$transaction((tx) => readSnapshots(tx, targets, distinct), { isolationLevel: Prisma.TransactionIsolationLevel.RepeatableRead });
    },
    async changesSince(targets, mark) {
      if (targets.length === 0) return [];
      // By commit, not by version: two persist transactions commit in either order, so a
      // change older than the snapshot's newest version may still have committed after it.
      // Rows written before txid was recorded predate every snapshot still in use.
      const [rows, views] = await Promise.all([
        db.$queryRaw<{ target_type: string; target_id: string; relation: string; user_id: string; member: boolean; version: string }[]>`
          SELECT r.target_type, r.target_id::text AS target_id, r.relation, r.user_id::text, r.member, r.version::text
          FROM ${targetsTable(targets)} JOIN relation_versions r ON r.target_type = t.target_type AND r.target_id = t.target_id
          WHERE r.txid IS NOT NULL AND NOT pg_visible_in_snapshot(r.txid::text::xid8, ${mark}::pg_snapshot)`,
        db.$queryRaw<{ target_type: string; target_id: string; epoch: string; total: string }[]>`
          SELECT v.target_type, v.target_id::text AS target_id, v.epoch::text, v.total::text
          FROM ${targetsTable(targets)} JOIN view_totals v ON v.target_type = t.target_type AND v.target_id = t.target_id
          WHERE v.txid IS NOT NULL AND NOT pg_visible_in_snapshot(v.txid::text::xid8, ${mark}::pg_snapshot)`,
      ]);
      const changesOf = grouped(rows);
      const viewsOf = grouped(views);
      return targets.map((target): CommittedSince => {
        const key = keyOf(target.type, target.id.toString());
        return {
          changes: (changesOf.get(key) ?? []).map((r) => ({
            relation: r.relation as Relation,
            userId: BigInt(r.user_id),
            member: r.member,
            version: BigInt(r.version),
          })),
          views: (viewsOf.get(key) ?? []).map((v) => ({ epoch: BigInt(v.epoch), total: Number(v.total) })),
        };
      });
    },
    sawCommit,
    async derived(targets) {
      const wanted = targets.flatMap((target) => (derivedCounters[target.type] as readonly CounterName[]).map((name) => ({ target, name })));
      if (wanted.length === 0) return [];
      const rows = await db.$queryRaw<CounterRow[]>(selectCounters(wanted));
      return rows.map(toCounterValue);
    },
    async newestChange(target) {
      const [newest] = await db.$queryRaw<{ v: string }[]>`SELECT ${newestChange(target)}::text AS v`;
      return BigInt(newest?.v ?? "0");
    },
    async newestVersion(target) {
      const [newest] = await db.$queryRaw<{ v: string }[]>`
        SELECT GREATEST(
          ${newestChange(target)},
          (SELECT COALESCE(max(epoch), 0)::numeric * ${epochScale.toString()}::numeric FROM target_epochs WHERE target_type = ${target.type} AND target_id = ${target.id})
        )::text AS v`;
      return BigInt(newest?.v ?? "0");
    },
  };
}

/**
 * Whether transaction `txid` had committed when the snapshot `mark` was taken:
 * pg_visible_in_snapshot's rule, on the text form of a pg_snapshot
 * ('xmin:xmax:xip,…'), so a caller can ask it of many changes without a query.
 */
export function sawCommit(mark: string, txid: bigint): boolean {
  const [xmin, xmax, xip = ""] = mark.split(":");
  if (xmin === undefined || xmax === undefined) return false;
  if (txid < BigInt(xmin)) return true;
  if (txid >= BigInt(xmax)) return false;
  return !xip.split(",").filter(Boolean).map(BigInt).includes(txid);
}
