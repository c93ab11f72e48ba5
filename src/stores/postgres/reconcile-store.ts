// What a reconcile pass reads from PostgreSQL, and the repairs it makes there.
import { Prisma } from "../../generated/prisma/client.js";
import type { LikeableTarget } from "../../domain/model.js";
import type { DatabaseReconcileStore } from "../../domain/ports.js";
import { epochScale } from "../versions.js";
import type { Database } from "./database.js";

export function createDatabaseReconcileStore(db: Database): DatabaseReconcileStore {
  // Waits for a batch that holds the counter row, so the count below includes its rows.
  const lockCounter = (target: LikeableTarget) =>
    db.$executeRaw`SELECT 1 FROM counters WHERE target_type = ${target.type} AND target_id = ${target.id} AND name = 'like' FOR UPDATE`;
  const recount = (target: LikeableTarget) => db.$executeRaw`
    INSERT INTO counters (target_type, target_id, name, value)
    VALUES (${target.type}, ${target.id}, 'like', (SELECT count(*) FROM likes WHERE target_type = ${target.type} AND target_id = ${target.id}))
    ON CONFLICT (target_type, target_id, name) DO UPDATE SET value = EXCLUDED.value`;

  return {
    async read(targets, memberLimit) {
      if (targets.length === 0) return [];
      const types = targets.map((t) => t.type);
      const ids = targets.map((t) => t.id.toString());
      const [sizes, counters, versions] = await Promise.all([
        db.$queryRaw<{ target_type: string; target_id: string; rows: string }[]>`
          SELECT l.target_type, l.target_id::text AS target_id, count(*)::text AS rows
          FROM likes l JOIN unnest(${types}::text[], ${ids}::text[]::bigint[]) AS t(target_type, target_id)
            ON l.target_type = t.target_type AND l.target_id = t.target_id
          GROUP BY 1, 2`,
        db.$queryRaw<{ target_type: string; target_id: string; value: string }[]>`
          SELECT c.target_type, c.target_id::text AS target_id, c.value::text AS value
          FROM counters c JOIN unnest(${types}::text[], ${ids}::text[]::bigint[]) AS t(target_type, target_id)
            ON c.target_type = t.target_type AND c.target_id = t.target_id AND c.name = 'like'`,
        // The newest version a target has: its newest applied change, or the start of the
        // epoch its last rebuild opened (a rebuilt target with no change since is quiescent).
        db.$queryRaw<{ target_type: string; target_id: string; version: string }[]>`
          SELECT target_type, target_id::text AS target_id, max(version)::text AS version FROM (
            SELECT v.target_type, v.target_id, v.version
            FROM like_versions v JOIN unnest(${types}::text[], ${ids}::text[]::bigint[]) AS t(target_type, target_id)
              ON v.target_type = t.target_type AND v.target_id = t.target_id
            UNION ALL
            SELECT e.target_type, e.target_id, e.epoch::numeric * ${epochScale.toString()}::numeric
            FROM target_epochs e JOIN unnest(${types}::text[], ${ids}::text[]::bigint[]) AS t(target_type, target_id)
              ON e.target_type = t.target_type AND e.target_id = t.target_id
          ) newest GROUP BY target_type, target_id`,
      ]);
      const key = (type: string, id: string) => `${type}:${id}`;
      const rowsOf = new Map(sizes.map((s) => [key(s.target_type, s.target_id), Number(s.rows)]));
      // Members of the small targets only: a big one is walked in keyset pages (membersAfter).
      const small = targets.filter((t) => (rowsOf.get(key(t.type, t.id.toString())) ?? 0) <= memberLimit);
      const rows = small.length === 0 ? [] : await db.$queryRaw<{ target_type: string; target_id: string; user_id: string }[]>`
          SELECT l.target_type, l.target_id::text AS target_id, l.user_id::text AS user_id
          FROM likes l JOIN unnest(${small.map((t) => t.type)}::text[], ${small.map((t) => t.id.toString())}::text[]::bigint[]) AS t(target_type, target_id)
            ON l.target_type = t.target_type AND l.target_id = t.target_id`;
      const members = new Map<string, bigint[]>(small.map((t) => [key(t.type, t.id.toString()), []]));
      for (const r of rows) members.get(key(r.target_type, r.target_id))?.push(BigInt(r.user_id));
      const count = new Map(counters.map((c) => [key(c.target_type, c.target_id), Number(c.value)]));
      const version = new Map(versions.map((v) => [key(v.target_type, v.target_id), BigInt(v.version)]));
      return targets.map((t) => {
        const k = key(t.type, t.id.toString());
        const list = members.get(k) ?? null;
        // Rows committed between the two reads: the walk of a big target (or the version check) sorts that out.
        const tooMany = list !== null && list.length > memberLimit;
        return { members: tooMany ? null : list, rows: list && !tooMany ? list.length : (rowsOf.get(k) ?? 0), count: count.get(k) ?? 0, version: version.get(k) ?? 0n };
      });
    },
    async membersAfter(target, afterUser, limit) {
      const rows = await db.$queryRaw<{ user_id: string }[]>`
        SELECT user_id::text AS user_id FROM likes
        WHERE target_type = ${target.type} AND target_id = ${target.id} AND user_id > ${afterUser}
        ORDER BY user_id LIMIT ${limit}`;
      return rows.map((r) => BigInt(r.user_id));
    },
    async likedBy(target, users) {
      if (users.length === 0) return [];
      const rows = await db.$queryRaw<{ user_id: string }[]>`
        SELECT l.user_id::text AS user_id FROM likes l
        WHERE l.target_type = ${target.type} AND l.target_id = ${target.id} AND l.user_id = ANY(${users.map(String)}::text[]::bigint[])`;
      const liked = new Set(rows.map((r) => BigInt(r.user_id)));
      return users.map((u) => liked.has(u));
    },
    async page(after, limit) {
      const afterType = after?.type ?? "";
      const afterId = (after?.id ?? 0n).toString();
      const rows = await db.$queryRaw<{ target_type: string; target_id: string; count: string; rows: string }[]>`
        WITH page AS (
          SELECT target_type, target_id FROM (
            (SELECT DISTINCT target_type, target_id FROM likes
              WHERE (target_type, target_id) > (${afterType}, ${afterId}::bigint) ORDER BY 1, 2 LIMIT ${limit})
            UNION
            (SELECT target_type, target_id FROM counters
              WHERE name = 'like' AND (target_type, target_id) > (${afterType}, ${afterId}::bigint) ORDER BY 1, 2 LIMIT ${limit})
          ) u ORDER BY 1, 2 LIMIT ${limit}
        )
        SELECT p.target_type, p.target_id::text AS target_id, COALESCE(c.value, 0)::text AS count,
          (SELECT count(*) FROM likes l WHERE l.target_type = p.target_type AND l.target_id = p.target_id)::text AS rows
        FROM page p LEFT JOIN counters c ON c.target_type = p.target_type AND c.target_id = p.target_id AND c.name = 'like'
        ORDER BY 1, 2`;
      return rows
        .filter((r) => r.target_type === "post" || r.target_type === "comment")
        .map((r) => ({ target: { type: r.target_type as LikeableTarget["type"], id: BigInt(r.target_id) }, count: Number(r.count), rows: Number(r.rows) }));
    },
    async repair(repair) {
      const { target } = repair;
      if (repair.kind === "recountDatabase") {
        await db.$transaction([lockCounter(target), recount(target)]);
        return;
      }
      // Records the repaired state for these users, except where a pair's version moved
      // past the observed one (it changed after the comparison): returns the users that passed.
      const gate = (users: readonly bigint[], liked: boolean) => Prisma.sql`
        INSERT INTO like_versions (target_type, target_id, user_id, version, liked, txid)
        SELECT ${target.type}, ${target.id}, u, ${repair.observedVersion.toString()}::numeric, ${liked}, pg_current_xact_id()::text::bigint
        FROM unnest(${users.map(String)}::text[]::bigint[]) AS u
        ON CONFLICT (target_type, target_id, user_id) DO UPDATE SET version = EXCLUDED.version, liked = EXCLUDED.liked, txid = EXCLUDED.txid
          WHERE like_versions.version <= EXCLUDED.version
        RETURNING user_id`;
      await db.$transaction([
        lockCounter(target),
        db.$executeRaw`
          WITH passed AS (${gate(repair.add, true)})
          INSERT INTO likes (target_type, target_id, user_id) SELECT ${target.type}, ${target.id}, user_id FROM passed
          ON CONFLICT DO NOTHING`,
        db.$executeRaw`
          WITH passed AS (${gate(repair.remove, false)})
          DELETE FROM likes WHERE target_type = ${target.type} AND target_id = ${target.id} AND user_id IN (SELECT user_id FROM passed)`,
        recount(target),
      ]);
    },
    async countTargets() {
      const [row] = await db.$queryRaw<{ n: string }[]>`
        SELECT count(*)::text AS n FROM (SELECT target_type, target_id FROM counters WHERE name = 'like'
          UNION SELECT DISTINCT target_type, target_id FROM likes) t`;
      return Number(row?.n ?? 0);
    },
  };
}
