// The persist batch's ranking step (persist-store.ts sequences the steps):
// like_buckets moved by the likes a batch really inserted and deleted, and what the
// hot ranking mirrors of the posts it names.
import {
  bucketRetentionMs,
  bucketSpans,
  bucketStart,
  keptBuckets,
  type BucketCount,
  type BucketSpan,
  type CommittedChange,
  type RankedLikes,
  type Target,
} from "../../domain/model/index.js";
import { selectCounters, toCounterValue, type CounterRow } from "./counter-sql.js";
import { compareIds, type MovedRow, type Transaction } from "./persist-steps.js";

/** Likes a batch moves in one (span, bucket, post). */
export interface BucketDelta {
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

/** The likes of posts the batch moved, per (span, bucket, post) that PostgreSQL keeps at `nowMs`. */
export function bucketDeltas(moved: readonly MovedRow[], nowMs: number): BucketDelta[] {
  const buckets = new Map<string, BucketDelta>();
  for (const { relation, sign, row } of moved) {
    if (relation === "like" && row.target_type === "post") countInBuckets(buckets, BigInt(row.target_id), row.created_at.getTime(), sign, nowMs);
  }
  return [...buckets.values()];
}

/**
 * Moves the bucket rows by the likes really inserted and deleted (each write taking
 * a new seq under the row's lock), then reads what the hot ranking mirrors for the
 * posts the batch's like changes name, moved now or by an earlier delivery: the
 * bucket of each like's time in each span (a like's row holds the change's time),
 * every bucket still in its window for a post unliked (the deleted row's time is
 * known only to the delivery that deleted it), and each post's like count.
 */
export async function rankPosts(
  tx: Transaction,
  deltas: readonly BucketDelta[],
  current: readonly CommittedChange[],
  nowMs: number,
  counted: readonly CounterRow[],
): Promise<RankedLikes> {
  const moved = deltas.filter((d) => d.delta !== 0).sort((a, b) => a.span.localeCompare(b.span) || a.startMs - b.startMs || compareIds(a.postId, b.postId));
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
  const buckets: BucketCount[] = [...written.filter(isWanted), ...read].map((r) => ({
    span: r.span as BucketSpan,
    startMs: Number(r.start_ms),
    postId: BigInt(r.target_id),
    likes: r.likes,
    seq: BigInt(r.seq),
  }));
  // Like counters the batch's own upsert returned need no second read.
  const likeCounts = counted.filter((row) => row.target_type === "post" && row.name === "like" && posts.has(BigInt(row.target_id)));
  const countedPosts = new Set(likeCounts.map((row) => row.target_id));
  const unread = [...posts.values()].filter((target) => !countedPosts.has(target.id.toString()));
  const read2 = unread.length ? await tx.$queryRaw<CounterRow[]>(selectCounters(unread.map((target) => ({ target, name: "like" as const })))) : [];
  return { buckets, totals: [...likeCounts, ...read2].map(toCounterValue) };
}
