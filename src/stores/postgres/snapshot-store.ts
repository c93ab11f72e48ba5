// What a load of targets into Redis reads from PostgreSQL: many targets in one
// snapshot, read by one statement whatever their number, and what committed to
// them after it.
import { Prisma } from "../../generated/prisma/client.js";
import {
  derivedCounters,
  type AppliedChange,
  type CounterValue,
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
import { toCounterValue } from "./counter-sql.js";
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

/** The targets grouped by type, each group's ids as text. */
function byType(targets: readonly Target[]): Map<TargetType, string[]> {
  const groups = new Map<TargetType, string[]>();
  for (const t of targets) groups.set(t.type, [...(groups.get(t.type) ?? []), t.id.toString()]);
  return groups;
}

/** The derived counters of every type, as (target_type, name) pairs for an IN list. */
const derivedPairs = Prisma.join(
  Object.entries(derivedCounters).flatMap(([type, names]) => (names as readonly string[]).map((name) => Prisma.sql`(${type}, ${name})`)),
);

/** A row of changesSince's statement: what `kind` says, with up to four text values. */
interface SinceRow {
  kind: "r" | "v" | "d";
  target_type: string;
  target_id: string;
  a: string | null;
  b: string | null;
  c: string | null;
  d: string | null;
}

/** A row of the snapshot statement: what `kind` says, with up to three text values. */
interface SnapshotRow {
  /** k: the snapshot's mark; e: a target's newest version and new epoch; c: its counters; w: a post's views of an epoch; m: its members of a relation. */
  kind: "k" | "e" | "c" | "w" | "m";
  target_type: string | null;
  target_id: string | null;
  a: string | null;
  b: string | null;
  c: string | null;
}

/**
 * Every member of each target, per relation: one aggregated string a target (a hot
 * target has tens of thousands), as rows of the snapshot statement.
 */
function membersPart(targets: readonly Target[]): Prisma.Sql[] {
  const parts: Prisma.Sql[] = [];
  for (const [type, ids] of byType(targets)) {
    for (const relation of relationsOf(type)) {
      const t = relationTables[relation];
      parts.push(Prisma.sql`
        SELECT 'm', ${type}::text, ${t.targetId("l")}::text, ${relation}::text, string_agg(${t.userId("l")}::text, ','), NULL
        FROM ${t.table} l WHERE ${t.targetType("l")} = ${type} AND ${t.targetId("l")} = ANY(${ids}::text[]::bigint[])
        GROUP BY ${t.targetId("l")}`);
    }
  }
  return parts;
}

/**
 * The snapshot of the targets as one statement, so one snapshot of the database: every
 * part of a statement sees what had committed when it began, and pg_current_snapshot()
 * names that moment (the mark changesSince goes by). It also gives each target a new
 * epoch above every epoch PostgreSQL has seen for it (changes still in flight carry at
 * most the previous one: the new one outranks them all). One round trip whatever the
 * number of targets: a transaction of a statement per kind of row took eight, the most
 * of a load's cost in the API (each a socket write and read), measured with a CPU profile.
 */
function snapshotStatement(targets: readonly Target[]): Prisma.Sql {
  const posts = targets.filter((t) => t.type === "post").map((p) => p.id.toString());
  return Prisma.sql`
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
    SELECT 'k' AS kind, NULL::text AS target_type, NULL::text AS target_id, pg_current_snapshot()::text AS a, NULL::text AS b, NULL::text AS c
    UNION ALL
    SELECT 'e', v.target_type, v.target_id::text, v.version::text, e.epoch::text, NULL
    FROM v JOIN e ON e.target_type = v.target_type AND e.target_id = v.target_id
    UNION ALL
    SELECT 'c', c.target_type, c.target_id::text, c.name, c.value::text, c.seq::text
    FROM ${targetsTable(targets)} JOIN counters c ON c.target_type = t.target_type AND c.target_id = t.target_id
    UNION ALL
    SELECT 'w', 'post', target_id::text, epoch::text, total::text, NULL
    FROM view_totals WHERE target_type = 'post' AND target_id = ANY(${posts}::text[]::bigint[])
    ${Prisma.join(
      membersPart(targets).map((part) => Prisma.sql`UNION ALL ${part}`),
      " ",
      "",
    )}`;
}

/** The snapshots of `targets` (in order, repeats allowed) from the snapshot statement's rows over `distinct`. */
function snapshotsOf(targets: readonly Target[], rows: readonly SnapshotRow[]): TargetSnapshot[] {
  let mark = "";
  const of = new Map<string, { members: Partial<Record<Relation, bigint[]>>; counters: SnapshotRow[]; views: SnapshotRow[]; version: bigint; epoch: bigint }>();
  const entry = (row: SnapshotRow) => {
    const key = keyOf(row.target_type ?? "", row.target_id ?? "");
    let found = of.get(key);
    if (!found) of.set(key, (found = { members: {}, counters: [], views: [], version: 0n, epoch: 1n }));
    return found;
  };
  for (const row of rows) {
    if (row.kind === "k") mark = row.a ?? "";
    else if (row.kind === "e") Object.assign(entry(row), { version: BigInt(row.a ?? "0"), epoch: BigInt(row.b ?? "1") });
    else if (row.kind === "c") entry(row).counters.push(row);
    else if (row.kind === "w") entry(row).views.push(row);
    else entry(row).members[row.a as Relation] = (row.b ?? "").split(",").map(BigInt);
  }
  return targets.map((target) => {
    const found = of.get(keyOf(target.type, target.id.toString()));
    const members: Partial<Record<Relation, bigint[]>> = {};
    for (const relation of relationsOf(target.type)) members[relation] = found?.members[relation] ?? [];
    const counters = found?.counters ?? [];
    const derived = counters.filter((c) => isDerivedCounter(target.type, c.a ?? ""));
    return {
      members,
      counts: Object.fromEntries(counters.map((c): [string, number] => [c.a ?? "", Number(c.b)])),
      seqs: Object.fromEntries(derived.map((c) => [c.a as CounterName, BigInt(c.c ?? "0")])),
      viewTotals: (found?.views ?? []).map((v) => ({ epoch: BigInt(v.a ?? "0"), total: Number(v.b) })),
      version: found?.version ?? 0n,
      epoch: found?.epoch ?? 1n,
      mark,
    };
  });
}

export function createSnapshotStore(db: Database): SnapshotStore {
  return {
    async read(targets) {
      if (targets.length === 0) return [];
      const distinct = [...new Map(targets.map((t) => [keyOf(t.type, t.id.toString()), t])).values()];
      return snapshotsOf(targets, await db.$queryRaw<SnapshotRow[]>(snapshotStatement(distinct)));
    },
    async changesSince(targets, mark) {
      if (targets.length === 0) return [];
      // By commit, not by version: two persist transactions commit in either order, so a
      // change older than the snapshot's newest version may still have committed after it.
      // Rows written before txid was recorded predate every snapshot still in use.
      // One statement (one round trip): r, a relation's change; v, a post's views of an epoch;
      // d, a derived counter as it stands now.
      const rows = await db.$queryRaw<SinceRow[]>`
        SELECT 'r' AS kind, r.target_type, r.target_id::text AS target_id, r.relation AS a, r.user_id::text AS b, r.member::text AS c, r.version::text AS d
        FROM ${targetsTable(targets)} JOIN relation_versions r ON r.target_type = t.target_type AND r.target_id = t.target_id
        WHERE r.txid IS NOT NULL AND NOT pg_visible_in_snapshot(r.txid::text::xid8, ${mark}::pg_snapshot)
        UNION ALL
        SELECT 'v', v.target_type, v.target_id::text, v.epoch::text, v.total::text, NULL, NULL
        FROM ${targetsTable(targets)} JOIN view_totals v ON v.target_type = t.target_type AND v.target_id = t.target_id
        WHERE v.txid IS NOT NULL AND NOT pg_visible_in_snapshot(v.txid::text::xid8, ${mark}::pg_snapshot)
        UNION ALL
        SELECT 'd', c.target_type, c.target_id::text, c.name, c.value::text, c.seq::text, NULL
        FROM ${targetsTable(targets)} JOIN counters c ON c.target_type = t.target_type AND c.target_id = t.target_id
        WHERE (c.target_type, c.name) IN (${derivedPairs})`;
      const since = new Map<string, { changes: AppliedChange[]; views: { epoch: bigint; total: number }[]; derived: CounterValue[] }>();
      for (const row of rows) {
        const key = keyOf(row.target_type, row.target_id);
        let entry = since.get(key);
        if (!entry) since.set(key, (entry = { changes: [], views: [], derived: [] }));
        if (row.kind === "r")
          entry.changes.push({ relation: row.a as Relation, userId: BigInt(row.b ?? "0"), member: row.c === "true", version: BigInt(row.d ?? "0") });
        else if (row.kind === "v") entry.views.push({ epoch: BigInt(row.a ?? "0"), total: Number(row.b) });
        else
          entry.derived.push(
            toCounterValue({ target_type: row.target_type, target_id: row.target_id, name: row.a ?? "", value: row.b ?? "0", seq: row.c ?? "0" }),
          );
      }
      return targets.map((target): CommittedSince => since.get(keyOf(target.type, target.id.toString())) ?? { changes: [], views: [], derived: [] });
    },
    sawCommit,
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
