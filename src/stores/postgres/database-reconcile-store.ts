// What a reconcile pass reads from PostgreSQL, and the repairs it makes there.
import { Prisma } from "../../generated/prisma/client.js";
import {
  derivedCounters,
  relations,
  relationNames,
  type CounterName,
  type CounterValue,
  type DatabaseTarget,
  type Relation,
  type Target,
  type TargetType,
} from "../../domain/model/index.js";
import type { DatabaseReconcileStore } from "../../domain/ports/index.js";
import type { Database } from "./database.js";
import { toCounterValue, type CounterRow } from "./counter-sql.js";
import { lockCounterRow, recountDerived, recountRelation, type Client } from "./counter-recounts.js";
import { newestListed } from "./list-rows.js";
import { newestVersions, truthOf } from "./reconcile-truth.js";
import { relationTables } from "./relation-tables.js";

const key = (type: string, id: string) => `${type}:${id}`;

// eslint-disable-next-line max-lines-per-function -- a store's methods share its database client in one closure; each is one port method.
export function createDatabaseReconcileStore(db: Database): DatabaseReconcileStore {
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

  return {
    async read(items, memberLimit) {
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
    },
    async membersAfter({ relation, target }, afterUser, limit) {
      const t = relationTables[relation];
      const rows = await db.$queryRaw<{ user_id: string }[]>`
        SELECT ${t.userId("l")}::text AS user_id FROM ${t.table} l
        WHERE ${t.targetType("l")} = ${target.type} AND ${t.targetId("l")} = ${target.id} AND ${t.userId("l")} > ${afterUser}
        ORDER BY ${t.userId("l")} LIMIT ${limit}`;
      return rows.map((r) => BigInt(r.user_id));
    },
    async membersAmong({ relation, target }, users) {
      if (users.length === 0) return [];
      const t = relationTables[relation];
      const rows = await db.$queryRaw<{ user_id: string }[]>`
        SELECT ${t.userId("l")}::text AS user_id FROM ${t.table} l
        WHERE ${t.targetType("l")} = ${target.type} AND ${t.targetId("l")} = ${target.id} AND ${t.userId("l")} = ANY(${users.map(String)}::text[]::bigint[])`;
      const found = new Set(rows.map((r) => BigInt(r.user_id)));
      return users.map((u) => found.has(u));
    },
    newestListed: (lists, limit) => newestListed(db, lists, limit),
    async pairRecords({ relation, target }, users) {
      if (users.length === 0) return new Map();
      const rows = await db.$queryRaw<{ user_id: string; member: boolean; version: string }[]>`
        SELECT user_id::text AS user_id, member, version::text AS version FROM relation_versions
        WHERE target_type = ${target.type} AND target_id = ${target.id} AND relation = ${relation}
          AND user_id = ANY(${users.map(String)}::text[]::bigint[])`;
      return new Map(rows.map((r) => [BigInt(r.user_id), { member: r.member, version: BigInt(r.version) }]));
    },
    async page(after, limit) {
      const afterType = after?.target.type ?? "";
      const afterId = (after?.target.id ?? 0n).toString();
      const afterRelation = after?.relation ?? "";
      // Per relation, the next targets with rows or a counter; then the first `limit` of them all in (type, id, relation) order.
      // The bound is written as (type, id) comparisons an index can start from, not as one
      // (type, id, relation) row whose constant last column the planner misjudges: a page then reads its
      // targets' index entries (merged from every partition) rather than the table to its end and a sort.
      // The target types are a filter (IS TRUE): as an index condition they made every page of counters
      // start at the first row of its type (45 ms a page at 1,000,000 posts, 0.1 ms as a filter).
      const candidates = relationNames.map((relation) => {
        const t = relationTables[relation];
        const name = relations[relation].counter;
        const types = relations[relation].targets as readonly string[];
        return Prisma.sql`
          SELECT target_type, target_id, ${relation}::text AS relation FROM (
            (SELECT DISTINCT ${t.targetType("l")} AS target_type, ${t.targetId("l")} AS target_id FROM ${t.table} l
              WHERE (${t.targetType("l")}, ${t.targetId("l")}) >= (${afterType}, ${afterId}::bigint)
                AND ((${t.targetType("l")}, ${t.targetId("l")}) > (${afterType}, ${afterId}::bigint) OR ${relation}::text > ${afterRelation}::text)
              ORDER BY 1, 2 LIMIT ${limit})
            UNION
            (SELECT target_type, target_id FROM counters
              WHERE name = ${name} AND (target_type = ANY(${types}::text[])) IS TRUE
                AND (target_type, target_id) >= (${afterType}, ${afterId}::bigint)
                AND ((target_type, target_id) > (${afterType}, ${afterId}::bigint) OR ${relation}::text > ${afterRelation}::text)
              ORDER BY 1, 2 LIMIT ${limit})
          ) r`;
      });
      const rows = await db.$queryRaw<{ target_type: string; target_id: string; relation: Relation; count: string; rows: string }[]>`
        WITH page AS (
          SELECT * FROM (${Prisma.join(candidates, " UNION ALL ")}) u ORDER BY target_type, target_id, relation LIMIT ${limit}
        )
        SELECT p.target_type, p.target_id::text AS target_id, p.relation,
          COALESCE((SELECT c.value FROM counters c WHERE c.target_type = p.target_type AND c.target_id = p.target_id
            AND c.name = CASE p.relation ${Prisma.join(
              relationNames.map((r) => Prisma.sql`WHEN ${r} THEN ${relations[r].counter}`),
              " ",
            )} END), 0)::text AS count,
          CASE p.relation ${Prisma.join(
            relationNames.map((r) => {
              const t = relationTables[r];
              return Prisma.sql`WHEN ${r} THEN (SELECT count(*) FROM ${t.table} l WHERE ${t.targetType("l")} = p.target_type AND ${t.targetId("l")} = p.target_id)`;
            }),
            " ",
          )} END::text AS rows
        FROM page p ORDER BY 1, 2, 3`;
      return rows.map((r) => ({
        relation: r.relation,
        target: { type: r.target_type as TargetType, id: BigInt(r.target_id) },
        count: Number(r.count),
        rows: Number(r.rows),
      }));
    },
    async countTargets() {
      const parts = relationNames.map((relation) => {
        const t = relationTables[relation];
        return Prisma.sql`
          SELECT target_type, target_id, ${relation}::text FROM counters
            WHERE name = ${relations[relation].counter} AND target_type = ANY(${relations[relation].targets}::text[])
          UNION SELECT DISTINCT ${t.targetType("l")}, ${t.targetId("l")}, ${relation}::text FROM ${t.table} l`;
      });
      const [row] = await db.$queryRaw<{ n: string }[]>`SELECT count(*)::text AS n FROM (${Prisma.join(parts, " UNION ")}) t`;
      return Number(row?.n ?? 0);
    },
    async counterPage(after, limit) {
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
    },
    async countCounterTargets() {
      const [row] = await db.$queryRaw<{ n: string }[]>`
        SELECT ((SELECT count(*) FROM users) + (SELECT count(*) FROM posts) + (SELECT count(*) FROM comments))::text AS n`;
      return Number(row?.n ?? 0);
    },
    async repair(repair) {
      switch (repair.kind) {
        case "recountDatabase":
          await db.$transaction((tx) => recountRelation(tx, repair));
          return [];
        case "recountDerived":
          return db.$transaction((tx) => recountDerived(tx, repair.target, repair.names));
        case "alignViews":
          await db.$transaction(async (tx) => {
            // Views that reached PostgreSQL since the comparison make the repair stale: the next pass compares again.
            await lockCounterRow(tx, repair.target, "read");
            const [newest] = await tx.$queryRaw<{ version: string }[]>(newestVersions([repair.target.type], [repair.target.id.toString()]));
            if (BigInt(newest?.version ?? "0") !== repair.observedVersion) return;
            await tx.$executeRaw`
              UPDATE counters SET value = ${repair.views}, seq = seq + 1
              WHERE target_type = ${repair.target.type} AND target_id = ${repair.target.id} AND name = 'read'`;
          });
          return [];
        case "alignDatabase":
          return db.$transaction(async (tx) => {
            const { relation, target } = repair;
            const t = relationTables[relation];
            const name = relations[relation].counter;
            await lockCounterRow(tx, target, name, { create: false });
            // Records the repaired state for these users, except where a pair's version moved
            // past the observed one (it changed after the comparison): returns the users that passed.
            const gate = (users: readonly bigint[], member: boolean) => Prisma.sql`
              INSERT INTO relation_versions (target_type, target_id, relation, user_id, version, member, txid)
              SELECT ${target.type}, ${target.id}, ${relation}, u, ${repair.observedVersion.toString()}::numeric, ${member}, pg_current_xact_id()::text::bigint
              FROM unnest(${users.map(String)}::text[]::bigint[]) AS u
              ON CONFLICT (target_type, target_id, relation, user_id) DO UPDATE SET version = EXCLUDED.version, member = EXCLUDED.member, txid = EXCLUDED.txid
                WHERE relation_versions.version <= EXCLUDED.version
              RETURNING user_id`;
            const added = await tx.$queryRaw<{ user_id: string }[]>`
              WITH passed AS (${gate(repair.add, true)})
              INSERT INTO ${t.table} AS l (${t.insertColumns})
              SELECT ${t.insertValues} FROM (SELECT ${target.type}::text AS target_type, ${target.id}::bigint AS target_id, user_id, now() AS created_at FROM passed) k
              ON CONFLICT DO NOTHING
              RETURNING ${t.userId("l")}::text AS user_id`;
            const removed = await tx.$queryRaw<{ user_id: string }[]>`
              WITH passed AS (${gate(repair.remove, false)})
              DELETE FROM ${t.table} l WHERE ${t.targetType("l")} = ${target.type} AND ${t.targetId("l")} = ${target.id}
                AND ${t.userId("l")} IN (SELECT user_id FROM passed)
              RETURNING ${t.userId("l")}::text AS user_id`;
            await recountRelation(tx, repair);
            // Whom the moved rows credit: the target's author, or each moved follower.
            const { credit } = relations[relation];
            const credited =
              credit.to === "member"
                ? [...added, ...removed].map((r) => BigInt(r.user_id))
                : added.length + removed.length > 0
                  ? (
                      await tx.$queryRaw<{ author_id: string }[]>`
                      SELECT author_id::text FROM ${Prisma.raw(target.type === "post" ? "posts" : "comments")} WHERE id = ${target.id}`
                    ).map((r) => BigInt(r.author_id))
                  : [];
            const values: CounterValue[] = [];
            const inLockOrder = [...new Set(credited)].sort((a, b) => `user:${a}`.localeCompare(`user:${b}`));
            for (const user of inLockOrder) values.push(...(await recountDerived(tx, { type: "user", id: user }, [credit.name])));
            return values;
          });
      }
    },
    async derived(target, names) {
      if (names.length === 0) return [];
      const rows = await db.$queryRaw<CounterRow[]>`
        SELECT target_type, target_id::text AS target_id, name, value::text AS value, seq::text AS seq FROM counters
        WHERE target_type = ${target.type} AND target_id = ${target.id} AND name = ANY(${names as readonly string[]}::text[])`;
      const found = new Map(rows.map((r) => [r.name, toCounterValue(r)]));
      return names.map((name) => found.get(name) ?? { target, name, value: 0, seq: 0n });
    },
  };
}
