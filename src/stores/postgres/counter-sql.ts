import { Prisma } from "../../generated/prisma/client.js";
import type { CounterDelta } from "../../domain/model.js";

/** One statement that adds every delta to `counters`, creating rows as needed. */
export function upsertCounters(deltas: readonly CounterDelta[]): Prisma.Sql {
  const rows = deltas.map((d) => Prisma.sql`(${d.target.type}, ${d.target.id}, ${d.name}, ${BigInt(d.delta)})`);
  return Prisma.sql`
    INSERT INTO counters (target_type, target_id, name, value)
    VALUES ${Prisma.join(rows)}
    ON CONFLICT (target_type, target_id, name) DO UPDATE SET value = counters.value + EXCLUDED.value`;
}
