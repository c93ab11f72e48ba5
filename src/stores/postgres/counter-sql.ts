import { Prisma } from "../../generated/prisma/client.js";
import type { TargetType } from "../../domain/targets.js";

export interface CounterDelta {
  readonly type: TargetType;
  readonly id: bigint;
  readonly name: string;
  readonly delta: number;
}

/** One statement that adds every delta to `counters`, creating rows as needed. */
export function upsertCounters(deltas: readonly CounterDelta[]): Prisma.Sql {
  const rows = deltas.map((d) => Prisma.sql`(${d.type}, ${d.id}, ${d.name}, ${BigInt(d.delta)})`);
  return Prisma.sql`
    INSERT INTO counters (target_type, target_id, name, value)
    VALUES ${Prisma.join(rows)}
    ON CONFLICT (target_type, target_id, name) DO UPDATE SET value = counters.value + EXCLUDED.value`;
}
