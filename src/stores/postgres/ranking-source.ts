// The hot ranking's truth in PostgreSQL: like_buckets (written by the persist batch,
// persist-store.ts) and the posts' like counters.
import { bucketSpans, keptBuckets, type BucketCount, type BucketSpan } from "../../domain/model/index.js";
import type { RankingSource } from "../../domain/ports/index.js";
import { toCounterValue, type CounterRow } from "./counter-sql.js";
import type { Database } from "./database.js";

export function createRankingSource(db: Database): RankingSource {
  return {
    async best(nowMs, limit) {
      const live = [...keptBuckets(nowMs)].flatMap(([span, starts]) => [...starts].map((startMs) => ({ span, startMs })));
      // One statement: per bucket, its rows through the primary key's (span, bucket) prefix, sorted.
      // No index on likes (nor on counters' values): every persist batch moves those, and an index
      // on them cost persistence a third of its rate, for a rebuild that runs only after Redis lost
      // the ranking. The rows last written down to 0 come too, so their seqs keep a late older
      // write from bringing them back.
      const rows = await db.$queryRaw<{ span: string; start_ms: string; target_id: string; likes: number; seq: string }[]>`
        SELECT b.span, (extract(epoch FROM b.bucket) * 1000)::bigint::text AS start_ms, b.target_id::text AS target_id, b.likes, b.seq::text AS seq
        FROM unnest(${live.map((l) => l.span)}::text[], ${live.map((l) => new Date(l.startMs).toISOString())}::text[]::timestamptz[]) AS k(span, bucket)
        CROSS JOIN LATERAL (
          (SELECT * FROM like_buckets b WHERE b.span = k.span AND b.bucket = k.bucket AND b.likes > 0
           ORDER BY b.likes DESC, b.target_id DESC LIMIT ${limit})
          UNION ALL
          (SELECT * FROM like_buckets b WHERE b.span = k.span AND b.bucket = k.bucket AND b.likes <= 0
           ORDER BY b.seq DESC LIMIT ${limit})
        ) b`;
      const totals = await db.$queryRaw<CounterRow[]>`
        (SELECT target_type, target_id::text AS target_id, name, value::text AS value, seq::text AS seq FROM counters
         WHERE target_type = 'post' AND name = 'like' AND value > 0
         ORDER BY value DESC, target_id DESC LIMIT ${limit})
        UNION ALL
        (SELECT target_type, target_id::text AS target_id, name, value::text AS value, seq::text AS seq FROM counters
         WHERE target_type = 'post' AND name = 'like' AND value <= 0
         ORDER BY seq DESC LIMIT ${limit})`;
      const buckets: BucketCount[] = rows.map((r) => ({
        span: r.span as BucketSpan,
        startMs: Number(r.start_ms),
        postId: BigInt(r.target_id),
        likes: r.likes,
        seq: BigInt(r.seq),
      }));
      return { buckets, totals: totals.map(toCounterValue) };
    },
    async prune(before, limit) {
      return db.$executeRaw`
        DELETE FROM like_buckets WHERE (span, bucket, target_id) IN (
          SELECT span, bucket, target_id FROM like_buckets WHERE span = ANY(${bucketSpans}::text[]) AND bucket < ${before.toISOString()}::timestamptz LIMIT ${limit})`;
    },
  };
}
