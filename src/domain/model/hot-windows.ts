// The windows of the hot ranking and the time buckets they sum: the arithmetic the
// API, the pipeline and Redis's mirror of the ranking must agree on.
import type { CounterValue } from "./counts.js";

/**
 * Windows of the hot ranking (`hotPosts`): the posts that gained the most likes in
 * the last hour, day or week, by likes standing now whose time falls in the
 * window; ALL ranks by like count.
 */
export type HotWindow = "HOUR" | "DAY" | "WEEK" | "ALL";
export type BucketedWindow = Exclude<HotWindow, "ALL">;

/** Lengths of the time buckets a window sums, aligned on the Unix epoch: 5 minutes, 1 hour, 6 hours. */
export type BucketSpan = "m5" | "h1" | "h6";
export const bucketSpanMs: Readonly<Record<BucketSpan, number>> = { m5: 300_000, h1: 3_600_000, h6: 21_600_000 };

/** Each bucketed window and the span of its buckets; a span serves exactly one window. */
export const bucketedWindows = {
  HOUR: { span: "m5", lengthMs: 3_600_000 },
  DAY: { span: "h1", lengthMs: 86_400_000 },
  WEEK: { span: "h6", lengthMs: 7 * 86_400_000 },
} as const satisfies Record<BucketedWindow, { span: BucketSpan; lengthMs: number }>;

export const bucketedWindowNames = Object.keys(bucketedWindows) as BucketedWindow[];
export const bucketSpans = Object.keys(bucketSpanMs) as BucketSpan[];

/** The window whose buckets have this span. */
export function windowOfSpan(span: BucketSpan): BucketedWindow {
  return bucketedWindowNames.find((w) => bucketedWindows[w].span === span) as BucketedWindow;
}

/** Posts each ranking keeps (each bucket, each window, ALL): the memory bound. */
export const rankingCapacity = 1_000;
/** The most posts one `hotPosts` call answers. */
export const hotPostsLimit = 100;
/**
 * PostgreSQL keeps bucket rows this long after their start (the longest window, a
 * week, plus a bucket and a margin); a like older than that moves no bucket when unliked.
 */
export const bucketRetentionMs = 8 * 86_400_000;

export function bucketStart(span: BucketSpan, atMs: number): number {
  const size = bucketSpanMs[span];
  return Math.floor(atMs / size) * size;
}

/**
 * The starts of the buckets a window sums at `nowMs`, newest first: every bucket of
 * its span that overlaps (now − length, now]. So a window covers its length and at
 * most one bucket more (HOUR: 13 buckets of 5 minutes, 60–65 minutes).
 */
export function windowBuckets(window: BucketedWindow, nowMs: number): number[] {
  const { span, lengthMs } = bucketedWindows[window];
  const size = bucketSpanMs[span];
  const starts: number[] = [];
  for (let start = bucketStart(span, nowMs); start + size > nowMs - lengthMs; start -= size) starts.push(start);
  return starts;
}

/**
 * The buckets of each span whose rows Redis keeps at `nowMs`: those its window sums, and
 * the next one, for a like stamped by a clock a little ahead of this process's.
 */
export function keptBuckets(nowMs: number): ReadonlyMap<BucketSpan, ReadonlySet<number>> {
  return new Map(
    bucketedWindowNames.map((w) => {
      const { span } = bucketedWindows[w];
      return [span, new Set([bucketStart(span, nowMs) + bucketSpanMs[span], ...windowBuckets(w, nowMs)])];
    }),
  );
}

/** When a bucket has left its window for good: its end plus the window's length. */
export function bucketLeavesAt(span: BucketSpan, startMs: number): number {
  return startMs + bucketSpanMs[span] + bucketedWindows[windowOfSpan(span)].lengthMs;
}

/** Likes of a post given in one time bucket and standing now, with the sequence number of the row's last write. */
export interface BucketCount {
  readonly span: BucketSpan;
  readonly startMs: number;
  readonly postId: bigint;
  readonly likes: number;
  readonly seq: bigint;
}

/** What the hot ranking takes from PostgreSQL: bucket counts, and posts' like counts (ALL). */
export interface RankedLikes {
  readonly buckets: readonly BucketCount[];
  readonly totals: readonly CounterValue[];
}
