// The repairs' recounts: a counter row locked for a repair, then set from the rows
// it counts, in the order a persist batch locks counter rows.
import { Prisma } from "../../generated/prisma/client.js";
import { relations, type CounterName, type CounterValue, type Target } from "../../domain/model/index.js";
import type { RelationTarget } from "../../domain/ports/index.js";
import { toCounterValue, type CounterRow } from "./counter-sql.js";
import type { Database } from "./database.js";
import { truthOf } from "./reconcile-truth.js";
import { relationTables } from "./relation-tables.js";

export type Client = Pick<Database, "$queryRaw" | "$executeRaw">;

/**
 * Takes a counter row's lock for a repair. The row is made first (value 0, seq 0),
 * so there is one to lock and a persist batch moving the counter waits for the
 * repair, or the repair for it; with `create: false` a missing row stays missing
 * and nothing is locked.
 */
export async function lockCounterRow(tx: Client, target: Target, name: CounterName, { create = true }: { create?: boolean } = {}): Promise<void> {
  if (create) {
    await tx.$executeRaw`
      INSERT INTO counters (target_type, target_id, name, value, seq) VALUES (${target.type}, ${target.id}, ${name}, 0, 0)
      ON CONFLICT DO NOTHING`;
  }
  await tx.$executeRaw`SELECT 1 FROM counters WHERE target_type = ${target.type} AND target_id = ${target.id} AND name = ${name} FOR UPDATE`;
}

/**
 * Sets derived counters to what PostgreSQL's rows count, under the counter row's
 * lock: a persist batch that holds the lock commits first and its rows are
 * counted; one that comes after adds its delta to the recounted value.
 */
export async function recountDerived(tx: Client, target: Target, names: readonly CounterName[]): Promise<CounterValue[]> {
  const values: CounterValue[] = [];
  // In the order a persist batch locks counter rows (persist-store.ts), so the two never wait on each other in a cycle.
  for (const name of [...names].sort((a, b) => a.localeCompare(b))) {
    await lockCounterRow(tx, target, name);
    const truth = truthOf(target.type, name, Prisma.sql`ARRAY[${target.id}]::bigint[]`);
    const [row] = await tx.$queryRaw<CounterRow[]>`
      UPDATE counters SET value = COALESCE((SELECT n FROM (${truth}) t), 0), seq = seq + 1
      WHERE target_type = ${target.type} AND target_id = ${target.id} AND name = ${name}
      RETURNING target_type, target_id::text AS target_id, name, value::text AS value, seq::text AS seq`;
    if (row) values.push(toCounterValue(row));
  }
  return values;
}

/**
 * Sets a relation's counter of a target to its number of rows, under the counter
 * row's lock. The row is made first, so there is always one to lock: a consumer
 * adding the target's first member then waits for this transaction, or this one
 * for it, and the count (read by a statement after the lock) includes its row.
 */
export async function recountRelation(tx: Client, { relation, target }: RelationTarget): Promise<void> {
  const t = relationTables[relation];
  const name = relations[relation].counter;
  await lockCounterRow(tx, target, name);
  await tx.$executeRaw`
    UPDATE counters
    SET value = (SELECT count(*) FROM ${t.table} l WHERE ${t.targetType("l")} = ${target.type} AND ${t.targetId("l")} = ${target.id}), seq = seq + 1
    WHERE target_type = ${target.type} AND target_id = ${target.id} AND name = ${name}`;
}
