// What a read shows of targets Redis does not hold, from PostgreSQL (counter-reads.ts):
// their counts as `counters` holds them and a viewer's memberships from the
// relation tables, one statement each for a whole page, no transaction, nothing
// loaded into Redis.
import { Prisma } from "../../generated/prisma/client.js";
import { isCounterName, relationsOf, targetKey, type CounterName, type Relation, type Target } from "../../domain/model/index.js";
import type { PersistedCounts } from "../../domain/ports/index.js";
import type { Database } from "./database.js";
import { relationTables } from "./relation-tables.js";

/**
 * One SELECT per relation asked over the targets of the types that have it, joined
 * by UNION ALL into one statement: each probes the relation's primary key (target,
 * user) once per target, in the target's own partition.
 */
function membershipsQuery(userId: bigint, targets: readonly Target[], relations: readonly Relation[]): Prisma.Sql | null {
  const parts: Prisma.Sql[] = [];
  for (const relation of relations) {
    const ofRelation = targets.filter((t) => relationsOf(t.type).includes(relation));
    for (const type of new Set(ofRelation.map((t) => t.type))) {
      const ids = ofRelation.filter((t) => t.type === type).map((t) => t.id.toString());
      const t = relationTables[relation];
      parts.push(Prisma.sql`
        SELECT ${relation}::text AS relation, ${t.targetType("l")} AS target_type, ${t.targetId("l")}::text AS target_id FROM ${t.table} l
        WHERE ${t.targetType("l")} = ${type} AND ${t.targetId("l")} = ANY(${ids}::text[]::bigint[]) AND ${t.userId("l")} = ${userId}`);
    }
  }
  return parts.length > 0 ? Prisma.join(parts, " UNION ALL ") : null;
}

export function createPersistedCounts(db: Database): PersistedCounts {
  return {
    async counts(targets) {
      if (targets.length === 0) return [];
      // One row, every counter of the page in one text ("position:name:value,…"): a row per counter
      // (400 for a page of 100 posts) was most of a cold page's PostgreSQL cost in this process
      // (pg's parser, Prisma's mapping of each row, and their garbage), measured with a CPU profile.
      const [row] = await db.$queryRaw<{ found: string | null }[]>`
        SELECT string_agg(t.i::text || ':' || c.name || ':' || c.value::text, ',') AS found
        FROM unnest(${targets.map((t) => t.type)}::text[], ${targets.map((t) => t.id.toString())}::text[]::bigint[]) WITH ORDINALITY AS t(target_type, target_id, i)
        JOIN counters c ON c.target_type = t.target_type AND c.target_id = t.target_id`;
      const counts = targets.map((): Partial<Record<CounterName, number>> => ({}));
      for (const entry of row?.found?.split(",") ?? []) {
        const [position, name, value] = entry.split(":");
        const target = targets[Number(position) - 1];
        if (target && name && isCounterName(target.type, name)) (counts[Number(position) - 1] as Partial<Record<CounterName, number>>)[name] = Number(value);
      }
      return counts;
    },
    async memberships(userId, targets, relations) {
      const query = membershipsQuery(userId, targets, relations);
      const found = new Set<string>();
      if (query) {
        for (const row of await db.$queryRaw<{ relation: string; target_type: string; target_id: string }[]>(query)) {
          found.add(`${row.relation}:${row.target_type}:${row.target_id}`);
        }
      }
      return targets.map((target) => {
        const viewerIn: Partial<Record<Relation, boolean>> = {};
        for (const relation of relationsOf(target.type)) {
          if (relations.includes(relation)) viewerIn[relation] = found.has(`${relation}:${targetKey(target)}`);
        }
        return viewerIn;
      });
    },
  };
}
