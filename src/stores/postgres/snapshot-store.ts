import { Prisma } from "../../generated/prisma/client.js";
import { derivedCounters, isDerivedCounter, relationsOf, type CounterName, type Relation, type Target } from "../../domain/model/index.js";
import type { SnapshotStore } from "../../domain/ports/index.js";
import { epochScale } from "../versions.js";
import type { Database } from "./database.js";
import { selectCounters, toCounterValue, type CounterRow } from "./counter-sql.js";
import { relationTables } from "./relation-tables.js";

/** The newest version PostgreSQL holds for a target: its newest applied change (any relation, or views). */
const newestChange = (target: Target) => Prisma.sql`
  GREATEST(
    (SELECT COALESCE(max(version), 0) FROM relation_versions WHERE target_type = ${target.type} AND target_id = ${target.id}),
    (SELECT COALESCE(max(version), 0) FROM view_totals WHERE target_type = ${target.type} AND target_id = ${target.id}))`;

export function createSnapshotStore(db: Database): SnapshotStore {
  return {
    read(target) {
      // One snapshot: members, counters and version must describe the same moment.
      return db.$transaction(
        async (tx) => {
          // The transaction's snapshot, taken by its first statement: what it sees is exactly
          // what committed before, so changesSince can name what it does not see.
          const [{ mark } = { mark: "" }] = await tx.$queryRaw<{ mark: string }[]>`SELECT pg_current_snapshot()::text AS mark`;
          const members: Partial<Record<Relation, bigint[]>> = {};
          for (const relation of relationsOf(target.type)) {
            const t = relationTables[relation];
            // One aggregated string rather than a row object per member: a hot target has tens of thousands.
            const [row] = await tx.$queryRaw<{ users: string | null }[]>`
              SELECT string_agg(${t.userId("l")}::text, ',') AS users FROM ${t.table} l
              WHERE ${t.targetType("l")} = ${target.type} AND ${t.targetId("l")} = ${target.id}`;
            members[relation] = row?.users ? row.users.split(",").map(BigInt) : [];
          }
          const counters = await tx.counter.findMany({ where: { targetType: target.type, targetId: target.id } });
          const [version] = await tx.$queryRaw<{ v: string }[]>`SELECT ${newestChange(target)}::text AS v`;
          const viewTotals =
            target.type === "post"
              ? await tx.$queryRaw<{ epoch: string; total: string }[]>`
                  SELECT epoch::text, total::text FROM view_totals WHERE target_type = ${target.type} AND target_id = ${target.id}`
              : [];
          const applied = BigInt(version?.v ?? "0");
          // A new epoch, above every epoch a version PostgreSQL holds was stamped in
          // (changes still in flight carry at most the previous one).
          const [epoch] = await tx.$queryRaw<{ epoch: string }[]>`
            INSERT INTO target_epochs (target_type, target_id, epoch)
            VALUES (${target.type}, ${target.id}, ${(applied / epochScale + 1n).toString()}::bigint)
            ON CONFLICT (target_type, target_id) DO UPDATE
              SET epoch = GREATEST(target_epochs.epoch + 1, EXCLUDED.epoch)
            RETURNING epoch::text`;
          const derived = counters.filter((c) => isDerivedCounter(target.type, c.name));
          return {
            members,
            counts: Object.fromEntries(counters.map((c) => [c.name, Number(c.value)])),
            seqs: Object.fromEntries(derived.map((c) => [c.name as CounterName, c.seq])),
            viewTotals: viewTotals.map((v) => ({ epoch: BigInt(v.epoch), total: Number(v.total) })),
            version: applied,
            epoch: BigInt(epoch?.epoch ?? "1"),
            mark,
          };
        },
        { isolationLevel: Prisma.TransactionIsolationLevel.RepeatableRead },
      );
    },
    async changesSince(target, mark) {
      // By commit, not by version: two persist transactions commit in either order, so a
      // change older than the snapshot's newest version may still have committed after it.
      // Rows written before txid was recorded predate every snapshot still in use.
      const [rows, views] = await Promise.all([
        db.$queryRaw<{ relation: string; user_id: string; member: boolean; version: string }[]>`
          SELECT relation, user_id::text, member, version::text FROM relation_versions
          WHERE target_type = ${target.type} AND target_id = ${target.id}
            AND txid IS NOT NULL AND NOT pg_visible_in_snapshot(txid::text::xid8, ${mark}::pg_snapshot)`,
        db.$queryRaw<{ epoch: string; total: string }[]>`
          SELECT epoch::text, total::text FROM view_totals
          WHERE target_type = ${target.type} AND target_id = ${target.id}
            AND txid IS NOT NULL AND NOT pg_visible_in_snapshot(txid::text::xid8, ${mark}::pg_snapshot)`,
      ]);
      return {
        changes: rows.map((r) => ({ relation: r.relation as Relation, userId: BigInt(r.user_id), member: r.member, version: BigInt(r.version) })),
        views: views.map((v) => ({ epoch: BigInt(v.epoch), total: Number(v.total) })),
      };
    },
    sawCommit,
    async derived(target) {
      const rows = await db.$queryRaw<CounterRow[]>(selectCounters((derivedCounters[target.type] as readonly CounterName[]).map((name) => ({ target, name }))));
      return rows.map(toCounterValue);
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
