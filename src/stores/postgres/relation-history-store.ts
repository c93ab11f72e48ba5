import { Prisma } from "../../generated/prisma/client.js";
import type { ListPosition, MemberPosition, RelationChange, ViewChange } from "../../domain/model/index.js";
import type { MemberPageStore, PersistStore } from "../../domain/ports/index.js";
import type { Database } from "./database.js";
import { bucketDeltas, rankPosts } from "./like-buckets.js";
import { advanceVersions, changesByPair, countMoves, inPairOrder, moveCounters, moveRows, readCredits } from "./persist-steps.js";
import { relationTables } from "./relation-tables.js";
import { applyViews } from "./view-totals.js";

/** No cursor: a position newer than every row (infinity), with any id. */
const newest = { at: "infinity", id: "0" };

// eslint-disable-next-line max-lines-per-function -- a store's methods share its database client in one closure; each is one port method.
export function createRelationHistoryStore(db: Database): MemberPageStore & PersistStore {
  return {
    async members(requests) {
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
    },
    async memberships(requests) {
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
    },
    async apply(input) {
      const changes = input.filter((c): c is RelationChange => c.kind === "relation").sort(inPairOrder);
      const views = input.filter((c): c is ViewChange => c.kind === "views");
      if (changes.length === 0 && views.length === 0) {
        return { inserted: 0, deleted: 0, superseded: 0, passed: [], current: [], views: [], deltas: [], credits: [], ranked: { buckets: [], totals: [] } };
      }
      const byPair = changesByPair(changes);

      return db.$transaction(
        async (tx) => {
          // One lock order for every batch, so concurrent batches never wait on each other in a
          // cycle; the steps run in it. relation_versions rows in pair order (target type, target
          // id, relation, user); then relation by relation (likes, collects, follows) the rows
          // inserted, then those deleted, each in pair order; view_totals rows by (post, epoch);
          // counters rows by "type:id:name" (the recounts of counter-recounts.ts lock them in this
          // order too); like_buckets rows by (span, bucket, post). Credits are read, not locked.
          const { passed, current } = await advanceVersions(tx, changes, byPair);
          const now = Date.now();
          const moved = await moveRows(tx, passed);
          const tally = countMoves(moved, byPair);
          const committedViews = await applyViews(tx, views, tally.add);
          const deltas = tally.moved();
          const counted = await moveCounters(tx, deltas);
          const credits = await readCredits(tx, current);
          const ranked = await rankPosts(tx, bucketDeltas(moved, now), current, now, counted);
          return {
            inserted: moved.filter((m) => m.sign > 0).length,
            deleted: moved.filter((m) => m.sign < 0).length,
            superseded: changes.length - passed.length,
            passed,
            current,
            views: committedViews,
            deltas,
            credits,
            ranked,
          };
        },
        { timeout: 60_000, maxWait: 10_000, isolationLevel: Prisma.TransactionIsolationLevel.ReadCommitted },
      );
    },
  };
}
