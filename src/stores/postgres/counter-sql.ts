import { Prisma } from "../../generated/prisma/client.js";
import type { CounterDelta, CounterName, CounterValue, Target, TargetType } from "../../domain/model/index.js";

export interface CounterRow {
  target_type: string;
  target_id: string;
  name: string;
  value: string;
  seq: string;
}

export const toCounterValue = (row: CounterRow): CounterValue => ({
  target: { type: row.target_type as TargetType, id: BigInt(row.target_id) },
  name: row.name as CounterName,
  value: Number(row.value),
  seq: BigInt(row.seq),
});

/**
 * One statement that adds every delta to `counters`, creating rows as needed, and
 * answers each row as it stands after: its value and sequence number, which grows
 * with every write of the row (under its lock, so in commit order).
 */
export function upsertCounters(deltas: readonly CounterDelta[]): Prisma.Sql {
  const rows = deltas.map((d) => Prisma.sql`(${d.target.type}, ${d.target.id}, ${d.name}, ${BigInt(d.delta)}, 1)`);
  return Prisma.sql`
    INSERT INTO counters (target_type, target_id, name, value, seq)
    VALUES ${Prisma.join(rows)}
    ON CONFLICT (target_type, target_id, name) DO UPDATE SET value = counters.value + EXCLUDED.value, seq = counters.seq + 1
    RETURNING target_type, target_id::text AS target_id, name, value::text AS value, seq::text AS seq`;
}

/** The counters named, as they stand (value 0 and sequence number 0 for a counter never written). */
export function selectCounters(wanted: readonly { target: Target; name: CounterName }[]): Prisma.Sql {
  return Prisma.sql`
    SELECT w.target_type, w.target_id::text AS target_id, w.name, COALESCE(c.value, 0)::text AS value, COALESCE(c.seq, 0)::text AS seq
    FROM unnest(
      ${wanted.map((w) => w.target.type)}::text[],
      ${wanted.map((w) => w.target.id.toString())}::text[]::bigint[],
      ${wanted.map((w) => w.name)}::text[]
    ) AS w(target_type, target_id, name)
    LEFT JOIN counters c ON c.target_type = w.target_type AND c.target_id = w.target_id AND c.name = w.name`;
}
