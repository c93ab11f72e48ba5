// What a reconcile pass reads of PostgreSQL to compare users' lists with Redis
// (src/stores/redis/redis-reconcile-store.ts reads Redis's side).
import type { ListPosition } from "../../domain/model/index.js";
import type { ListRef } from "../../domain/ports/index.js";
import type { Database } from "./database.js";
import { relationTables } from "./relation-tables.js";

/** Per list, its user's newest `limit` rows of the relation to posts, newest first: one statement per relation. */
export async function newestListed(db: Pick<Database, "$queryRaw">, lists: readonly ListRef[], limit: number): Promise<ListPosition[][]> {
  const pages: ListPosition[][] = lists.map(() => []);
  for (const relation of new Set(lists.map((l) => l.relation))) {
    const asked = lists.flatMap((l, i) => (l.relation === relation ? [{ l, i }] : []));
    const t = relationTables[relation];
    // Walks the (user, created_at) index backwards from the newest row of each user.
    const rows = await db.$queryRaw<{ ord: number; created_at: Date; target_id: string }[]>`
      SELECT k.ord::int AS ord, l.created_at, l.target_id::text AS target_id
      FROM unnest(${asked.map(({ l }) => l.userId.toString())}::text[]::bigint[]) WITH ORDINALITY AS k(user_id, ord)
      CROSS JOIN LATERAL (
        SELECT l.created_at, ${t.targetId("l")} AS target_id FROM ${t.table} l
        WHERE ${t.userId("l")} = k.user_id AND ${t.targetType("l")} = 'post'
        ORDER BY l.created_at DESC, ${t.targetId("l")} DESC
        LIMIT ${limit}
      ) l
      ORDER BY k.ord, l.created_at DESC, l.target_id DESC`;
    for (const row of rows) pages[(asked[row.ord - 1] as { i: number }).i]?.push({ at: row.created_at, targetId: BigInt(row.target_id) });
  }
  return pages;
}
