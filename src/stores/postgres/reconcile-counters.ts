// The counters a reconcile pass compares: each target's derived counters as
// PostgreSQL holds them and as its rows say they should be, from one snapshot.
import { Prisma } from "../../generated/prisma/client.js";
import { derivedCounters, type CounterName, type Target, type TargetType } from "../../domain/model/index.js";
import type { DatabaseReconcileStore } from "../../domain/ports/index.js";
import type { Database } from "./database.js";
import { toCounterValue, type CounterRow } from "./counter-sql.js";
import { newestVersions, truthOf } from "./reconcile-truth.js";

type Port = DatabaseReconcileStore;

const key = (type: string, id: string) => `${type}:${id}`;

export async function counterPage(db: Database, after: Parameters<Port["counterPage"]>[0], limit: number) {
  const afterType = after?.type ?? "";
  const afterId = (after?.id ?? 0n).toString();
  // `id >= start` is where each table's primary key starts the page; without it every page
  // walked the table from its first id (120 ms a page at 1,000,000 posts, 0.1 ms with it).
  const start = (type: string) => Prisma.sql`(CASE WHEN ${afterType} = ${type} THEN ${afterId}::bigint ELSE 0 END)`;
  const targets = await db.$queryRaw<{ target_type: TargetType; id: string }[]>`
    SELECT * FROM (
      (SELECT 'comment'::text AS target_type, id FROM comments
        WHERE id >= ${start("comment")} AND ('comment', id) > (${afterType}, ${afterId}::bigint) ORDER BY id LIMIT ${limit})
      UNION ALL
      (SELECT 'post'::text, id FROM posts WHERE id >= ${start("post")} AND ('post', id) > (${afterType}, ${afterId}::bigint) ORDER BY id LIMIT ${limit})
      UNION ALL
      (SELECT 'user'::text, id FROM users WHERE id >= ${start("user")} AND ('user', id) > (${afterType}, ${afterId}::bigint) ORDER BY id LIMIT ${limit})
    ) t ORDER BY 1, 2 LIMIT ${limit}`;
  if (targets.length === 0) return [];
  const types = targets.map((t) => t.target_type);
  const ids = targets.map((t) => t.id);
  // One snapshot: a persist batch moves a derived counter in the transaction that writes the
  // rows it counts, so counters and rows agree unless something really drifted.
  const { counters, versions, truth } = await db.$transaction(
    async (tx) => {
      const counters = await tx.$queryRaw<CounterRow[]>`
        SELECT c.target_type, c.target_id::text AS target_id, c.name, c.value::text AS value, c.seq::text AS seq
        FROM counters c JOIN unnest(${types}::text[], ${ids}::text[]::bigint[]) AS t(target_type, target_id)
          ON c.target_type = t.target_type AND c.target_id = t.target_id`;
      const versions = await tx.$queryRaw<{ target_type: string; target_id: string; version: string }[]>(newestVersions(types, ids));
      const truth = new Map<string, number>();
      for (const type of ["post", "comment", "user"] as const) {
        const typed = targets.filter((t) => t.target_type === type).map((t) => t.id);
        if (typed.length === 0) continue;
        for (const name of derivedCounters[type]) {
          const rows = await tx.$queryRaw<{ id: string; n: string }[]>`
            SELECT id::text AS id, n::text AS n FROM (${truthOf(type, name, Prisma.sql`${typed}::text[]::bigint[]`)}) t`;
          for (const r of rows) truth.set(`${type}:${r.id}:${name}`, Number(r.n));
        }
      }
      return { counters, versions, truth };
    },
    { isolationLevel: Prisma.TransactionIsolationLevel.RepeatableRead, timeout: 60_000 },
  );
  const held = new Map(counters.map((c) => [`${c.target_type}:${c.target_id}:${c.name}`, c]));
  const version = new Map(versions.map((v) => [key(v.target_type, v.target_id), BigInt(v.version)]));
  return targets.map(({ target_type: type, id }) => {
    const names: CounterName[] = [...derivedCounters[type], ...(type === "post" ? (["read"] as const) : [])];
    const database: Partial<Record<CounterName, { value: number; seq: bigint }>> = {};
    const expected: Partial<Record<CounterName, number>> = {};
    for (const name of names) {
      const row = held.get(`${type}:${id}:${name}`);
      database[name] = { value: Number(row?.value ?? 0), seq: BigInt(row?.seq ?? 0) };
    }
    for (const name of derivedCounters[type]) expected[name] = truth.get(`${type}:${id}:${name}`) ?? 0;
    return { target: { type, id: BigInt(id) }, truth: expected, database, databaseVersion: version.get(key(type, id)) ?? 0n };
  });
}

export async function countCounterTargets(db: Database) {
  const [row] = await db.$queryRaw<{ n: string }[]>`
    SELECT ((SELECT count(*) FROM users) + (SELECT count(*) FROM posts) + (SELECT count(*) FROM comments))::text AS n`;
  return Number(row?.n ?? 0);
}

export async function derived(db: Database, target: Target, names: readonly CounterName[]) {
  if (names.length === 0) return [];
  const rows = await db.$queryRaw<CounterRow[]>`
    SELECT target_type, target_id::text AS target_id, name, value::text AS value, seq::text AS seq FROM counters
    WHERE target_type = ${target.type} AND target_id = ${target.id} AND name = ANY(${names as readonly string[]}::text[])`;
  const found = new Map(rows.map((r) => [r.name, toCounterValue(r)]));
  return names.map((name) => found.get(name) ?? { target, name, value: 0, seq: 0n });
}
