// What a reconcile pass reads from PostgreSQL, and the repairs it makes there: the
// store binds the database to the functions of each phase. The relations' survey
// (what each target holds, its members and pairs) is here; the pages of targets
// (reconcile-pages.ts), the counters (reconcile-counters.ts) and the repairs
// (reconcile-repairs.ts) have files of their own.
import { Prisma } from "../../generated/prisma/client.js";
import { relations, type DatabaseTarget, type Relation, type Target } from "../../domain/model/index.js";
import type { DatabaseReconcileStore } from "../../domain/ports/index.js";
import type { Database } from "./database.js";
import { type Client } from "./counter-recounts.js";
import { newestListed } from "./list-rows.js";
import { countCounterTargets, counterPage, derived } from "./reconcile-counters.js";
import { countTargets, page } from "./reconcile-pages.js";
import { repair } from "./reconcile-repairs.js";
import { newestVersions } from "./reconcile-truth.js";
import { relationTables } from "./relation-tables.js";

type Port = DatabaseReconcileStore;

export const targetKey = (type: string, id: string) => `${type}:${id}`;
const key = targetKey;

async function readRelation(tx: Client, relation: Relation, targets: readonly Target[], memberLimit: number): Promise<Omit<DatabaseTarget, "version">[]> {
  const t = relationTables[relation];
  const types = targets.map((x) => x.type);
  const ids = targets.map((x) => x.id.toString());
  // Per target (LATERAL), so each is read from its own partition through its index: joined as a
  // whole, the partitioned table was hashed from every partition's rows for each page.
  const sizes = await tx.$queryRaw<{ target_type: string; target_id: string; rows: string }[]>`
      SELECT t.target_type, t.target_id::text AS target_id, c.rows::text AS rows
      FROM unnest(${types}::text[], ${ids}::text[]::bigint[]) AS t(target_type, target_id)
      CROSS JOIN LATERAL (
        SELECT count(*) AS rows FROM ${t.table} l WHERE ${t.targetType("l")} = t.target_type AND ${t.targetId("l")} = t.target_id
      ) c
      WHERE c.rows > 0`;
  const counters = await tx.$queryRaw<{ target_type: string; target_id: string; value: string }[]>`
      SELECT c.target_type, c.target_id::text AS target_id, c.value::text AS value
      FROM counters c JOIN unnest(${types}::text[], ${ids}::text[]::bigint[]) AS t(target_type, target_id)
        ON c.target_type = t.target_type AND c.target_id = t.target_id AND c.name = ${relations[relation].counter}`;
  const rowsOf = new Map(sizes.map((s) => [key(s.target_type, s.target_id), Number(s.rows)]));
  // Members of the small targets only: a big one is walked in keyset pages (membersAfter).
  const small = targets.filter((x) => (rowsOf.get(key(x.type, x.id.toString())) ?? 0) <= memberLimit);
  const rows =
    small.length === 0
      ? []
      : await tx.$queryRaw<{ target_type: string; target_id: string; user_id: string }[]>`
      SELECT t.target_type, t.target_id::text AS target_id, l.user_id::text AS user_id
      FROM unnest(${small.map((x) => x.type)}::text[], ${small.map((x) => x.id.toString())}::text[]::bigint[]) AS t(target_type, target_id)
      CROSS JOIN LATERAL (
        SELECT ${t.userId("l")} AS user_id FROM ${t.table} l WHERE ${t.targetType("l")} = t.target_type AND ${t.targetId("l")} = t.target_id
      ) l`;
  const members = new Map<string, bigint[]>(small.map((x) => [key(x.type, x.id.toString()), []]));
  for (const r of rows) members.get(key(r.target_type, r.target_id))?.push(BigInt(r.user_id));
  const count = new Map(counters.map((c) => [key(c.target_type, c.target_id), Number(c.value)]));
  return targets.map((x) => {
    const k = key(x.type, x.id.toString());
    const list = members.get(k) ?? null;
    // Rows committed since the count (a big target's walk reads its pages later): the walk sorts that out.
    const tooMany = list !== null && list.length > memberLimit;
    return { members: tooMany ? null : list, rows: list && !tooMany ? list.length : (rowsOf.get(k) ?? 0), count: count.get(k) ?? 0 };
  });
}

/** Each item's version, rows, count and (for small targets) members, from one snapshot. */
export async function read(db: Database, items: Parameters<Port["read"]>[0], memberLimit: number) {
  if (items.length === 0) return [];
  // One snapshot: versions, rows and counters of one moment, so a version the pass finds
  // quiescent speaks for exactly the members read with it.
  return db.$transaction(
    async (tx) => {
      const versions = await tx.$queryRaw<{ target_type: string; target_id: string; version: string }[]>(
        newestVersions(
          items.map((i) => i.target.type),
          items.map((i) => i.target.id.toString()),
        ),
      );
      const version = new Map(versions.map((v) => [key(v.target_type, v.target_id), BigInt(v.version)]));
      const read: DatabaseTarget[] = new Array<DatabaseTarget>(items.length);
      for (const relation of new Set(items.map((i) => i.relation))) {
        const asked = items.flatMap((item, i) => (item.relation === relation ? [{ item, i }] : []));
        const found = await readRelation(
          tx,
          relation,
          asked.map(({ item }) => item.target),
          memberLimit,
        );
        asked.forEach(({ item, i }, j) => {
          read[i] = { ...(found[j] as Omit<DatabaseTarget, "version">), version: version.get(key(item.target.type, item.target.id.toString())) ?? 0n };
        });
      }
      return read;
    },
    { isolationLevel: Prisma.TransactionIsolationLevel.RepeatableRead, timeout: 60_000 },
  );
}

export async function membersAfter(db: Database, { relation, target }: Parameters<Port["membersAfter"]>[0], afterUser: bigint, limit: number) {
  const t = relationTables[relation];
  const rows = await db.$queryRaw<{ user_id: string }[]>`
    SELECT ${t.userId("l")}::text AS user_id FROM ${t.table} l
    WHERE ${t.targetType("l")} = ${target.type} AND ${t.targetId("l")} = ${target.id} AND ${t.userId("l")} > ${afterUser}
    ORDER BY ${t.userId("l")} LIMIT ${limit}`;
  return rows.map((r) => BigInt(r.user_id));
}

export async function membersAmong(db: Database, { relation, target }: Parameters<Port["membersAmong"]>[0], users: readonly bigint[]) {
  if (users.length === 0) return [];
  const t = relationTables[relation];
  const rows = await db.$queryRaw<{ user_id: string }[]>`
    SELECT ${t.userId("l")}::text AS user_id FROM ${t.table} l
    WHERE ${t.targetType("l")} = ${target.type} AND ${t.targetId("l")} = ${target.id} AND ${t.userId("l")} = ANY(${users.map(String)}::text[]::bigint[])`;
  const found = new Set(rows.map((r) => BigInt(r.user_id)));
  return users.map((u) => found.has(u));
}

export async function pairRecords(db: Database, { relation, target }: Parameters<Port["pairRecords"]>[0], users: readonly bigint[]) {
  if (users.length === 0) return new Map();
  const rows = await db.$queryRaw<{ user_id: string; member: boolean; version: string }[]>`
    SELECT user_id::text AS user_id, member, version::text AS version FROM relation_versions
    WHERE target_type = ${target.type} AND target_id = ${target.id} AND relation = ${relation}
      AND user_id = ANY(${users.map(String)}::text[]::bigint[])`;
  return new Map(rows.map((r) => [BigInt(r.user_id), { member: r.member, version: BigInt(r.version) }]));
}

export function createDatabaseReconcileStore(db: Database): DatabaseReconcileStore {
  return {
    read: (items, memberLimit) => read(db, items, memberLimit),
    membersAfter: (relationTarget, afterUser, limit) => membersAfter(db, relationTarget, afterUser, limit),
    membersAmong: (relationTarget, users) => membersAmong(db, relationTarget, users),
    newestListed: (lists, limit) => newestListed(db, lists, limit),
    pairRecords: (relationTarget, users) => pairRecords(db, relationTarget, users),
    page: (after, limit) => page(db, after, limit),
    countTargets: () => countTargets(db),
    counterPage: (after, limit) => counterPage(db, after, limit),
    countCounterTargets: () => countCounterTargets(db),
    repair: (change) => repair(db, change),
    derived: (target, names) => derived(db, target, names),
  };
}
