// The newest change PostgreSQL applied per pair (relation_versions), for the check
// of changes a Redis failover may have taken back (src/domain/lost-changes.ts).
import type { PairVersions } from "../../domain/ports/index.js";
import type { Database } from "./database.js";

export function createPairVersions(db: Database): PairVersions {
  return {
    async newest(pairs) {
      if (pairs.length === 0) return [];
      const rows = await db.$queryRaw<{ i: bigint; version: string | null }[]>`
        SELECT t.i, rv.version::text AS version
        FROM unnest(
          ${pairs.map((p) => p.target.type)}::text[],
          ${pairs.map((p) => p.target.id.toString())}::text[]::bigint[],
          ${pairs.map((p) => p.relation)}::text[],
          ${pairs.map((p) => p.userId.toString())}::text[]::bigint[]
        ) WITH ORDINALITY AS t(target_type, target_id, relation, user_id, i)
        LEFT JOIN relation_versions rv USING (target_type, target_id, relation, user_id)`;
      const byIndex = new Map(rows.map((row) => [Number(row.i), row.version === null ? null : BigInt(row.version)]));
      return pairs.map((_, k) => byIndex.get(k + 1) ?? null);
    },
  };
}
