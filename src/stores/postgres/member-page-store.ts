// Pages of who is a member of what, read from PostgreSQL's relation tables: one
// statement per relation asked, whatever the number of pages.
import type { ListPosition, MemberPosition } from "../../domain/model/index.js";
import type { MemberPageStore, MembershipsRequest, MembersRequest } from "../../domain/ports/index.js";
import type { Database } from "./database.js";
import { relationTables } from "./relation-tables.js";

/** No cursor: a position newer than every row (infinity), with any id. */
const newest = { at: "infinity", id: "0" };

async function members(db: Database, requests: readonly MembersRequest[]): Promise<MemberPosition[][]> {
  const pages: MemberPosition[][] = requests.map(() => []);
  // One statement per relation asked (a level of a query asks one): a LATERAL subquery per
  // target walks its (target, created_at) index backwards from its own cursor.
  for (const relation of new Set(requests.map((r) => r.relation))) {
    const asked = requests.flatMap((r, i) => (r.relation === relation ? [{ r, i }] : []));
    const t = relationTables[relation];
    const rows = await db.$queryRaw<{ ord: number; created_at: Date; user_id: string }[]>`
      SELECT k.ord::int AS ord, l.created_at, l.user_id::text AS user_id
      FROM unnest(
        ${asked.map(({ r }) => r.target.type)}::text[],
        ${asked.map(({ r }) => r.target.id.toString())}::text[]::bigint[],
        ${asked.map(({ r }) => r.after?.at.toISOString() ?? newest.at)}::text[]::timestamptz[],
        ${asked.map(({ r }) => r.after?.userId.toString() ?? newest.id)}::text[]::bigint[],
        ${asked.map(({ r }) => r.limit)}::int[]
      ) WITH ORDINALITY AS k(target_type, target_id, after_at, after_user, lim, ord)
      CROSS JOIN LATERAL (
        SELECT l.created_at, ${t.userId("l")} AS user_id FROM ${t.table} l
        WHERE ${t.targetType("l")} = k.target_type AND ${t.targetId("l")} = k.target_id
          AND (l.created_at, ${t.userId("l")}) < (k.after_at, k.after_user)
        ORDER BY l.created_at DESC, ${t.userId("l")} DESC
        LIMIT k.lim
      ) l
      ORDER BY k.ord, l.created_at DESC, l.user_id DESC`;
    for (const row of rows) pages[(asked[row.ord - 1] as { i: number }).i]?.push({ at: row.created_at, userId: BigInt(row.user_id) });
  }
  return pages;
}

async function memberships(db: Database, requests: readonly MembershipsRequest[]): Promise<ListPosition[][]> {
  const pages: ListPosition[][] = requests.map(() => []);
  for (const relation of new Set(requests.map((r) => r.relation))) {
    const asked = requests.flatMap((r, i) => (r.relation === relation ? [{ r, i }] : []));
    const t = relationTables[relation];
    // Walks the (user, created_at) index backwards from each cursor; ties in time go by target id.
    const rows = await db.$queryRaw<{ ord: number; created_at: Date; target_id: string }[]>`
      SELECT k.ord::int AS ord, l.created_at, l.target_id::text AS target_id
      FROM unnest(
        ${asked.map(({ r }) => r.userId.toString())}::text[]::bigint[],
        ${asked.map(({ r }) => r.targetType)}::text[],
        ${asked.map(({ r }) => r.after?.at.toISOString() ?? newest.at)}::text[]::timestamptz[],
        ${asked.map(({ r }) => r.after?.targetId.toString() ?? newest.id)}::text[]::bigint[],
        ${asked.map(({ r }) => r.limit)}::int[],
        ${asked.map(({ r }) => `{${[...r.skip].join(",")}}`)}::text[]
      ) WITH ORDINALITY AS k(user_id, target_type, after_at, after_target, lim, skip, ord)
      CROSS JOIN LATERAL (
        SELECT l.created_at, ${t.targetId("l")} AS target_id FROM ${t.table} l
        WHERE ${t.userId("l")} = k.user_id AND ${t.targetType("l")} = k.target_type
          AND (l.created_at, ${t.targetId("l")}) < (k.after_at, k.after_target)
          AND ${t.targetId("l")} <> ALL (k.skip::bigint[])
        ORDER BY l.created_at DESC, ${t.targetId("l")} DESC
        LIMIT k.lim
      ) l
      ORDER BY k.ord, l.created_at DESC, l.target_id DESC`;
    for (const row of rows) pages[(asked[row.ord - 1] as { i: number }).i]?.push({ at: row.created_at, targetId: BigInt(row.target_id) });
  }
  return pages;
}

export function createMemberPageStore(db: Database): MemberPageStore {
  return {
    members: (requests) => members(db, requests),
    memberships: (requests) => memberships(db, requests),
  };
}
