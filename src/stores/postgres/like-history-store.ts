import { Prisma } from "../../generated/prisma/client.js";
import type { CounterDelta, LikeableTarget, LikeChange, LikerPosition, Target } from "../../domain/model.js";
import type { LikeHistoryStore } from "../../domain/ports.js";
import type { Database } from "./database.js";
import { upsertCounters } from "./counter-sql.js";

interface AdvancedRow {
  target_type: string;
  target_id: string;
  user_id: string;
  liked: boolean;
  txid: string | null;
}

const byKey = (a: LikeChange, b: LikeChange) =>
  a.target.type.localeCompare(b.target.type) ||
  (a.target.id < b.target.id ? -1 : a.target.id > b.target.id ? 1 : 0) ||
  (a.userId < b.userId ? -1 : a.userId > b.userId ? 1 : 0);

export function createLikeHistoryStore(db: Database): LikeHistoryStore {
  return {
    async likers(requests) {
      if (requests.length === 0) return [];
      // One statement for every target: a LATERAL subquery per target walks its
      // (target_type, target_id, created_at) index backwards from its own cursor
      // (PostgreSQL bounds the scan by the row comparison's leading column). No
      // cursor is a position newer than every like: infinity, with any user id.
      const rows = await db.$queryRaw<{ ord: number; created_at: Date; user_id: string }[]>`
        SELECT k.ord::int AS ord, l.created_at, l.user_id::text AS user_id
        FROM unnest(
          ${requests.map((r) => r.target.type)}::text[],
          ${requests.map((r) => r.target.id.toString())}::text[]::bigint[],
          ${requests.map((r) => r.after?.at.toISOString() ?? "infinity")}::text[]::timestamptz[],
          ${requests.map((r) => r.after?.userId.toString() ?? "0")}::text[]::bigint[],
          ${requests.map((r) => r.limit)}::int[]
        ) WITH ORDINALITY AS k(target_type, target_id, after_at, after_user, lim, ord)
        CROSS JOIN LATERAL (
          SELECT l.created_at, l.user_id FROM likes l
          WHERE l.target_type = k.target_type AND l.target_id = k.target_id
            AND (l.created_at, l.user_id) < (k.after_at, k.after_user)
          ORDER BY l.created_at DESC, l.user_id DESC
          LIMIT k.lim
        ) l
        ORDER BY k.ord, l.created_at DESC, l.user_id DESC`;
      const pages: LikerPosition[][] = requests.map(() => []);
      for (const row of rows) pages[row.ord - 1]?.push({ at: row.created_at, userId: BigInt(row.user_id) });
      return pages;
    },
    async apply(input) {
      if (input.length === 0) return { inserted: 0, deleted: 0, superseded: 0, passed: [], current: [], deltas: [] };
      // One lock order for every batch, so concurrent batches do not deadlock.
      const changes = [...input].sort(byKey);
      const key = (type: string, id: string, user: string) => `${type}:${id}:${user}`;
      const byPair = new Map(changes.map((c) => [key(c.target.type, c.target.id.toString(), c.userId.toString()), c]));

      return db.$transaction(
        async (tx) => {
          const advanced = await tx.$queryRaw<AdvancedRow[]>`
            INSERT INTO like_versions (target_type, target_id, user_id, version, liked, txid)
            SELECT *, pg_current_xact_id()::text::bigint FROM unnest(
              ${changes.map((c) => c.target.type)}::text[],
              ${changes.map((c) => c.target.id.toString())}::text[]::bigint[],
              ${changes.map((c) => c.userId.toString())}::text[]::bigint[],
              ${changes.map((c) => c.version.toString())}::text[]::numeric[],
              ${changes.map((c) => c.liked)}::boolean[])
            ON CONFLICT (target_type, target_id, user_id) DO UPDATE
              SET version = EXCLUDED.version, liked = EXCLUDED.liked, txid = EXCLUDED.txid
              WHERE like_versions.version < EXCLUDED.version
            RETURNING target_type, target_id::text AS target_id, user_id::text AS user_id, liked, txid::text AS txid`;
          const passed = advanced.map((row) => byPair.get(key(row.target_type, row.target_id, row.user_id)) as LikeChange);
          // Changes an earlier delivery applied are still their pair's newest when the row holds
          // their version: a redelivery after a failure past the commit must replay them too.
          const advancedKeys = new Set(advanced.map((row) => key(row.target_type, row.target_id, row.user_id)));
          const repeated = changes.filter((c) => !advancedKeys.has(key(c.target.type, c.target.id.toString(), c.userId.toString())));
          const standing = repeated.length
            ? await tx.$queryRaw<AdvancedRow[]>`
                SELECT v.target_type, v.target_id::text AS target_id, v.user_id::text AS user_id, v.liked, v.txid::text AS txid
                FROM like_versions v JOIN unnest(
                  ${repeated.map((c) => c.target.type)}::text[],
                  ${repeated.map((c) => c.target.id.toString())}::text[]::bigint[],
                  ${repeated.map((c) => c.userId.toString())}::text[]::bigint[],
                  ${repeated.map((c) => c.version.toString())}::text[]::numeric[]) AS c(target_type, target_id, user_id, version)
                ON v.target_type = c.target_type AND v.target_id = c.target_id AND v.user_id = c.user_id AND v.version = c.version
                WHERE v.txid IS NOT NULL`
            : [];
          const current = [...advanced, ...standing].map((row) => ({
            change: byPair.get(key(row.target_type, row.target_id, row.user_id)) as LikeChange,
            txid: BigInt(row.txid ?? "0"),
          }));
          const likes = passed.filter((c) => c.liked);
          const unlikes = passed.filter((c) => !c.liked);

          const inserted = likes.length
            ? await tx.$queryRaw<{ target_type: string; target_id: string }[]>`
                INSERT INTO likes (target_type, target_id, user_id, created_at)
                SELECT * FROM unnest(
                  ${likes.map((c) => c.target.type)}::text[],
                  ${likes.map((c) => c.target.id.toString())}::text[]::bigint[],
                  ${likes.map((c) => c.userId.toString())}::text[]::bigint[],
                  ${likes.map((c) => c.at.toISOString())}::text[]::timestamptz[])
                ON CONFLICT DO NOTHING
                RETURNING target_type, target_id::text AS target_id`
            : [];
          const deleted = unlikes.length
            ? await tx.$queryRaw<{ target_type: string; target_id: string }[]>`
                DELETE FROM likes l
                USING unnest(
                  ${unlikes.map((c) => c.target.type)}::text[],
                  ${unlikes.map((c) => c.target.id.toString())}::text[]::bigint[],
                  ${unlikes.map((c) => c.userId.toString())}::text[]::bigint[]) AS d(target_type, target_id, user_id)
                WHERE l.target_type = d.target_type AND l.target_id = d.target_id AND l.user_id = d.user_id
                RETURNING l.target_type, l.target_id::text AS target_id`
            : [];

          const deltas = new Map<string, CounterDelta>();
          const add = (target: Target, name: CounterDelta["name"], delta: number) => {
            const k = `${target.type}:${target.id}:${name}`;
            deltas.set(k, { target, name, delta: (deltas.get(k)?.delta ?? 0) + delta });
          };
          const authorOf = new Map(changes.map((c) => [`${c.target.type}:${c.target.id}`, c.authorId]));
          for (const [rows, sign] of [[inserted, 1], [deleted, -1]] as const) {
            for (const row of rows) {
              const target: LikeableTarget = { type: row.target_type as LikeableTarget["type"], id: BigInt(row.target_id) };
              add(target, "like", sign);
              const author = authorOf.get(`${target.type}:${target.id}`);
              if (author) add({ type: "user", id: author }, "likesReceived", sign);
            }
          }
          const moved = [...deltas].filter(([, d]) => d.delta !== 0).sort(([a], [b]) => a.localeCompare(b)).map(([, d]) => d);
          if (moved.length) await tx.$executeRaw(upsertCounters(moved));
          return { inserted: inserted.length, deleted: deleted.length, superseded: changes.length - advanced.length, passed, current, deltas: moved };
        },
        { timeout: 60_000, maxWait: 10_000, isolationLevel: Prisma.TransactionIsolationLevel.ReadCommitted },
      );
    },
  };
}
