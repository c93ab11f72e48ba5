import { Prisma } from "../../generated/prisma/client.js";
import {
  bucketRetentionMs,
  bucketSpans,
  bucketStart,
  keptBuckets,
  relations,
  type BucketCount,
  type BucketSpan,
  type CommittedChange,
  type CommittedViews,
  type CounterDelta,
  type CounterName,
  type MemberPosition,
  type ListPosition,
  type RankedLikes,
  type Relation,
  type RelationChange,
  type Target,
  type TargetType,
  type ViewChange,
} from "../../domain/model/index.js";
import type { RelationHistoryStore } from "../../domain/ports/index.js";
import { splitVersion } from "../versions.js";
import type { Database } from "./database.js";
import { selectCounters, toCounterValue, upsertCounters, type CounterRow } from "./counter-sql.js";
import { relationTables } from "./relation-tables.js";

interface AdvancedRow {
  target_type: string;
  target_id: string;
  relation: string;
  user_id: string;
  member: boolean;
  txid: string | null;
}

type Transaction = Parameters<Parameters<Database["$transaction"]>[0]>[0];

/** A row a relation statement inserted or deleted. */
interface MovedRow {
  target_type: string;
  target_id: string;
  user_id: string;
  created_at: Date;
}

/** Likes a batch moves in one (span, bucket, post). */
interface BucketDelta {
  readonly span: BucketSpan;
  readonly startMs: number;
  readonly postId: bigint;
  delta: number;
}

/** Adds a like given at `atMs` (or its removal) to its bucket of each span, unless PostgreSQL no longer keeps that bucket. */
function countInBuckets(buckets: Map<string, BucketDelta>, postId: bigint, atMs: number, sign: number, nowMs: number): void {
  if (atMs <= nowMs - bucketRetentionMs) return;
  for (const span of bucketSpans) {
    const startMs = bucketStart(span, atMs);
    const key = `${span}:${startMs}:${postId}`;
    const held = buckets.get(key);
    if (held) held.delta += sign;
    else buckets.set(key, { span, startMs, postId, delta: sign });
  }
}

/**
 * Moves the bucket rows by the likes really inserted and deleted (each write taking
 * a new seq under the row's lock), then reads what the hot ranking mirrors for the
 * posts the batch's like changes name, moved now or by an earlier delivery: the
 * bucket of each like's time in each span (a like's row holds the change's time),
 * every bucket still in its window for a post unliked (the deleted row's time is
 * known only to the delivery that deleted it), and each post's like count.
 */
async function rankPosts(
  tx: Transaction,
  deltas: readonly BucketDelta[],
  current: readonly CommittedChange[],
  nowMs: number,
  counted: readonly CounterRow[],
): Promise<RankedLikes> {
  const moved = deltas.filter((d) => d.delta !== 0).sort((a, b) => a.span.localeCompare(b.span) || a.startMs - b.startMs || compare(a.postId, b.postId));
  type BucketRow = { span: string; start_ms: string; target_id: string; likes: number; seq: string };
  // The rows this batch moved come back from the write itself; only those an earlier delivery moved are read.
  const written = moved.length
    ? // Sorted, so concurrent batches lock rows in one order. A row created by an unlike
      // (a like PostgreSQL got without the pipeline, such as a repair's) may go below 0; Redis ranks only above 0.
      await tx.$queryRaw<BucketRow[]>`
        INSERT INTO like_buckets AS b (span, bucket, target_id, likes)
        SELECT * FROM unnest(
          ${moved.map((d) => d.span)}::text[],
          ${moved.map((d) => new Date(d.startMs).toISOString())}::text[]::timestamptz[],
          ${moved.map((d) => d.postId.toString())}::text[]::bigint[],
          ${moved.map((d) => d.delta)}::int[])
        ON CONFLICT (span, bucket, target_id) DO UPDATE
          SET likes = b.likes + EXCLUDED.likes, seq = nextval('like_buckets_seq')
        RETURNING b.span, (extract(epoch FROM b.bucket) * 1000)::bigint::text AS start_ms, b.target_id::text AS target_id, b.likes, b.seq::text AS seq`
    : [];
  const live = keptBuckets(nowMs);
  const wanted = new Map<string, { span: BucketSpan; startMs: number; postId: bigint }>();
  const want = (span: BucketSpan, startMs: number, postId: bigint) => {
    if (live.get(span)?.has(startMs)) wanted.set(`${span}:${startMs}:${postId}`, { span, startMs, postId });
  };
  const posts = new Map<bigint, Target>();
  for (const { change } of current) {
    if (change.relation !== "like" || change.target.type !== "post") continue;
    posts.set(change.target.id, change.target);
    for (const span of bucketSpans) {
      if (change.member) want(span, bucketStart(span, change.at.getTime()), change.target.id);
      else for (const startMs of live.get(span) ?? []) want(span, startMs, change.target.id);
    }
  }
  if (posts.size === 0) return { buckets: [], totals: [] };
  const rowKey = (span: string, startMs: number, postId: string) => `${span}:${startMs}:${postId}`;
  const known = new Set(written.map((r) => rowKey(r.span, Number(r.start_ms), r.target_id)));
  const keys = [...wanted.values()].filter((k) => !known.has(rowKey(k.span, k.startMs, k.postId.toString())));
  const read = keys.length
    ? await tx.$queryRaw<BucketRow[]>`
        SELECT b.span, (extract(epoch FROM b.bucket) * 1000)::bigint::text AS start_ms, b.target_id::text AS target_id, b.likes, b.seq::text AS seq
        FROM like_buckets b JOIN unnest(
          ${keys.map((k) => k.span)}::text[],
          ${keys.map((k) => new Date(k.startMs).toISOString())}::text[]::timestamptz[],
          ${keys.map((k) => k.postId.toString())}::text[]::bigint[]) AS k(span, bucket, target_id)
        ON b.span = k.span AND b.bucket = k.bucket AND b.target_id = k.target_id`
    : [];
  const isWanted = (r: BucketRow) => wanted.has(rowKey(r.span, Number(r.start_ms), r.target_id));
  const buckets: BucketCount[] = [...written.filter(isWanted), ...read].map((r) => ({ span: r.span as BucketSpan, startMs: Number(r.start_ms), postId: BigInt(r.target_id), likes: r.likes, seq: BigInt(r.seq) }));
  // Like counters the batch's own upsert returned need no second read.
  const likeCounts = counted.filter((row) => row.target_type === "post" && row.name === "like" && posts.has(BigInt(row.target_id)));
  const countedPosts = new Set(likeCounts.map((row) => row.target_id));
  const unread = [...posts.values()].filter((target) => !countedPosts.has(target.id.toString()));
  const read2 = unread.length ? await tx.$queryRaw<CounterRow[]>(selectCounters(unread.map((target) => ({ target, name: "like" as const })))) : [];
  return { buckets, totals: [...likeCounts, ...read2].map(toCounterValue) };
}

const compare = (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0);
const byKey = (a: RelationChange, b: RelationChange) =>
  a.target.type.localeCompare(b.target.type) || compare(a.target.id, b.target.id) || a.relation.localeCompare(b.relation) || compare(a.userId, b.userId);
const pairKey = (type: string, id: string, relation: string, user: string) => `${type}:${id}:${relation}:${user}`;
const keyOf = (c: RelationChange) => pairKey(c.target.type, c.target.id.toString(), c.relation, c.userId.toString());

/** No cursor: a position newer than every row (infinity), with any id. */
const newest = { at: "infinity", id: "0" };

/**
 * Applies view changes: per (post, epoch), the highest total PostgreSQL holds
 * rises to the batch's, and the post's views rise by the difference. The rows
 * are created first and locked, so concurrent batches of one post each add
 * only what the other did not.
 */
async function applyViews(tx: Transaction, changes: readonly ViewChange[], add: (target: Target, name: CounterName, delta: number) => void): Promise<CommittedViews[]> {
  if (changes.length === 0) return [];
  const highest = new Map<string, ViewChange>();
  for (const c of changes) {
    const key = `${c.target.id}:${splitVersion(c.version).epoch}`;
    const kept = highest.get(key);
    if (!kept || c.total > kept.total) highest.set(key, c);
  }
  const rows = [...highest.values()].sort((a, b) => compare(a.target.id, b.target.id) || compare(a.version, b.version));
  const types = rows.map((c) => c.target.type);
  const ids = rows.map((c) => c.target.id.toString());
  const epochs = rows.map((c) => splitVersion(c.version).epoch.toString());
  await tx.$executeRaw`
    INSERT INTO view_totals (target_type, target_id, epoch, total, version)
    SELECT * , 0::bigint, 0::numeric FROM unnest(${types}::text[], ${ids}::text[]::bigint[], ${epochs}::text[]::bigint[])
    ON CONFLICT DO NOTHING`;
  const before = await tx.$queryRaw<{ target_id: string; epoch: string; total: string }[]>`
    SELECT v.target_id::text AS target_id, v.epoch::text AS epoch, v.total::text AS total
    FROM view_totals v JOIN unnest(${types}::text[], ${ids}::text[]::bigint[], ${epochs}::text[]::bigint[]) AS k(target_type, target_id, epoch)
      ON v.target_type = k.target_type AND v.target_id = k.target_id AND v.epoch = k.epoch
    ORDER BY v.target_type, v.target_id, v.epoch
    FOR UPDATE OF v`;
  const held = new Map(before.map((r) => [`${r.target_id}:${r.epoch}`, Number(r.total)]));
  const rising = rows.filter((c) => c.total > (held.get(`${c.target.id}:${splitVersion(c.version).epoch}`) ?? 0));
  if (rising.length > 0) {
    await tx.$executeRaw`
      UPDATE view_totals v SET total = k.total, version = k.version, txid = pg_current_xact_id()::text::bigint
      FROM unnest(
        ${rising.map((c) => c.target.type)}::text[],
        ${rising.map((c) => c.target.id.toString())}::text[]::bigint[],
        ${rising.map((c) => splitVersion(c.version).epoch.toString())}::text[]::bigint[],
        ${rising.map((c) => c.total.toString())}::text[]::bigint[],
        ${rising.map((c) => c.version.toString())}::text[]::numeric[]
      ) AS k(target_type, target_id, epoch, total, version)
      WHERE v.target_type = k.target_type AND v.target_id = k.target_id AND v.epoch = k.epoch`;
    for (const c of rising) add(c.target, "read", c.total - (held.get(`${c.target.id}:${splitVersion(c.version).epoch}`) ?? 0));
  }
  const after = await tx.$queryRaw<{ target_type: string; target_id: string; epoch: string; total: string; txid: string | null }[]>`
    SELECT v.target_type, v.target_id::text AS target_id, v.epoch::text AS epoch, v.total::text AS total, v.txid::text AS txid
    FROM view_totals v JOIN unnest(${types}::text[], ${ids}::text[]::bigint[], ${epochs}::text[]::bigint[]) AS k(target_type, target_id, epoch)
      ON v.target_type = k.target_type AND v.target_id = k.target_id AND v.epoch = k.epoch`;
  return after.map((r) => ({ target: { type: r.target_type as TargetType, id: BigInt(r.target_id) }, epoch: BigInt(r.epoch), total: Number(r.total), txid: BigInt(r.txid ?? "0") }));
}

export function createRelationHistoryStore(db: Database): RelationHistoryStore {
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
      const changes = input.filter((c): c is RelationChange => c.kind === "relation").sort(byKey);
      const views = input.filter((c): c is ViewChange => c.kind === "views");
      if (changes.length === 0 && views.length === 0) {
        return { inserted: 0, deleted: 0, superseded: 0, passed: [], current: [], views: [], deltas: [], credits: [], ranked: { buckets: [], totals: [] } };
      }
      const byPair = new Map(changes.map((c) => [keyOf(c), c]));

      return db.$transaction(
        async (tx) => {
          // One lock order for every batch (changes are sorted), so concurrent batches do not deadlock.
          const advanced = changes.length
            ? await tx.$queryRaw<AdvancedRow[]>`
                INSERT INTO relation_versions (target_type, target_id, relation, user_id, version, member, txid)
                SELECT *, pg_current_xact_id()::text::bigint FROM unnest(
                  ${changes.map((c) => c.target.type)}::text[],
                  ${changes.map((c) => c.target.id.toString())}::text[]::bigint[],
                  ${changes.map((c) => c.relation)}::text[],
                  ${changes.map((c) => c.userId.toString())}::text[]::bigint[],
                  ${changes.map((c) => c.version.toString())}::text[]::numeric[],
                  ${changes.map((c) => c.member)}::boolean[])
                ON CONFLICT (target_type, target_id, relation, user_id) DO UPDATE
                  SET version = EXCLUDED.version, member = EXCLUDED.member, txid = EXCLUDED.txid
                  WHERE relation_versions.version < EXCLUDED.version
                RETURNING target_type, target_id::text AS target_id, relation, user_id::text AS user_id, member, txid::text AS txid`
            : [];
          const rowKey = (row: AdvancedRow) => pairKey(row.target_type, row.target_id, row.relation, row.user_id);
          const passed = advanced.map((row) => byPair.get(rowKey(row)) as RelationChange);
          // Changes an earlier delivery applied are still their pair's newest when the row holds
          // their version: a redelivery after a failure past the commit must replay them too.
          const advancedKeys = new Set(advanced.map(rowKey));
          const repeated = changes.filter((c) => !advancedKeys.has(keyOf(c)));
          const standing = repeated.length
            ? await tx.$queryRaw<AdvancedRow[]>`
                SELECT v.target_type, v.target_id::text AS target_id, v.relation, v.user_id::text AS user_id, v.member, v.txid::text AS txid
                FROM relation_versions v JOIN unnest(
                  ${repeated.map((c) => c.target.type)}::text[],
                  ${repeated.map((c) => c.target.id.toString())}::text[]::bigint[],
                  ${repeated.map((c) => c.relation)}::text[],
                  ${repeated.map((c) => c.userId.toString())}::text[]::bigint[],
                  ${repeated.map((c) => c.version.toString())}::text[]::numeric[]) AS c(target_type, target_id, relation, user_id, version)
                ON v.target_type = c.target_type AND v.target_id = c.target_id AND v.relation = c.relation AND v.user_id = c.user_id AND v.version = c.version
                WHERE v.txid IS NOT NULL`
            : [];
          const current: CommittedChange[] = [...advanced, ...standing].map((row) => ({
            change: byPair.get(rowKey(row)) as RelationChange,
            txid: BigInt(row.txid ?? "0"),
          }));

          const deltas = new Map<string, CounterDelta>();
          const add = (target: Target, name: CounterName, delta: number) => {
            const k = `${target.type}:${target.id}:${name}`;
            deltas.set(k, { target, name, delta: (deltas.get(k)?.delta ?? 0) + delta });
          };
          let inserted = 0;
          let deleted = 0;
          const now = Date.now();
          const buckets = new Map<string, BucketDelta>();
          for (const relation of Object.keys(relations) as Relation[]) {
            const t = relationTables[relation];
            const joins = passed.filter((c) => c.relation === relation && c.member);
            const leaves = passed.filter((c) => c.relation === relation && !c.member);
            const moved = [
              ...(joins.length
                ? (
                    await tx.$queryRaw<MovedRow[]>`
                      INSERT INTO ${t.table} AS l (${t.insertColumns})
                      SELECT ${t.insertValues} FROM unnest(
                        ${joins.map((c) => c.target.type)}::text[],
                        ${joins.map((c) => c.target.id.toString())}::text[]::bigint[],
                        ${joins.map((c) => c.userId.toString())}::text[]::bigint[],
                        ${joins.map((c) => c.at.toISOString())}::text[]::timestamptz[]) AS k(target_type, target_id, user_id, created_at)
                      ON CONFLICT DO NOTHING
                      RETURNING ${t.targetType("l")} AS target_type, ${t.targetId("l")}::text AS target_id, ${t.userId("l")}::text AS user_id, l.created_at`
                  ).map((row) => ({ row, sign: 1 }))
                : []),
              ...(leaves.length
                ? (
                    await tx.$queryRaw<MovedRow[]>`
                      DELETE FROM ${t.table} l
                      USING unnest(
                        ${leaves.map((c) => c.target.type)}::text[],
                        ${leaves.map((c) => c.target.id.toString())}::text[]::bigint[],
                        ${leaves.map((c) => c.userId.toString())}::text[]::bigint[]) AS d(target_type, target_id, user_id)
                      WHERE ${t.targetType("l")} = d.target_type AND ${t.targetId("l")} = d.target_id AND ${t.userId("l")} = d.user_id
                      RETURNING ${t.targetType("l")} AS target_type, ${t.targetId("l")}::text AS target_id, ${t.userId("l")}::text AS user_id, l.created_at`
                  ).map((row) => ({ row, sign: -1 }))
                : []),
            ];
            const { counter, credit } = relations[relation];
            for (const { row, sign } of moved) {
              const target: Target = { type: row.target_type as TargetType, id: BigInt(row.target_id) };
              add(target, counter, sign);
              const credited = credit.to === "member" ? BigInt(row.user_id) : byPair.get(pairKey(row.target_type, row.target_id, relation, row.user_id))?.authorId;
              if (credited) add({ type: "user", id: credited }, credit.name, sign);
              if (relation === "like" && target.type === "post") countInBuckets(buckets, target.id, row.created_at.getTime(), sign, now);
              if (sign > 0) inserted++;
              else deleted++;
            }
          }
          const committedViews = await applyViews(tx, views, add);

          const moved = [...deltas].filter(([, d]) => d.delta !== 0).sort(([a], [b]) => a.localeCompare(b)).map(([, d]) => d);
          const counted = moved.length ? await tx.$queryRaw<CounterRow[]>(upsertCounters(moved)) : [];
          // Everyone the batch's changes credit, moved now or by an earlier delivery: Redis mirrors them as they stand.
          const creditedNames = new Map<string, { target: Target; name: CounterName }>();
          for (const { change } of current) {
            const { credit } = relations[change.relation];
            const user = credit.to === "member" ? change.userId : change.authorId;
            if (user !== null) creditedNames.set(`${user}:${credit.name}`, { target: { type: "user", id: user }, name: credit.name });
          }
          const credits = creditedNames.size ? (await tx.$queryRaw<CounterRow[]>(selectCounters([...creditedNames.values()]))).map(toCounterValue) : [];
          const ranked = await rankPosts(tx, [...buckets.values()], current, now, counted);
          return {
            inserted,
            deleted,
            superseded: changes.length - advanced.length,
            passed,
            current,
            views: committedViews,
            deltas: moved,
            credits,
            ranked,
          };
        },
        { timeout: 60_000, maxWait: 10_000, isolationLevel: Prisma.TransactionIsolationLevel.ReadCommitted },
      );
    },
  };
}
