-- The hot ranking's truth: likes of posts standing now, per time bucket of their
-- created_at (m5: 5 minutes, h1: 1 hour, h6: 6 hours), for the last 8 days. Each
-- write of a row takes a new seq from the sequence, under the row's lock, so a
-- row's seqs grow in commit order: Redis takes a bucket's value only with a
-- higher seq than it holds.
CREATE SEQUENCE "like_buckets_seq";

-- CreateTable
CREATE TABLE "like_buckets" (
    "span" TEXT NOT NULL,
    "bucket" TIMESTAMPTZ(3) NOT NULL,
    "target_id" BIGINT NOT NULL,
    "likes" INTEGER NOT NULL,
    "seq" BIGINT NOT NULL DEFAULT nextval('like_buckets_seq'),

    CONSTRAINT "like_buckets_pkey" PRIMARY KEY ("span","bucket","target_id")
);

-- CreateIndex: a bucket's top posts, for the ranking's rebuild.
CREATE INDEX "like_buckets_span_bucket_likes_target_id_idx" ON "like_buckets"("span", "bucket", "likes", "target_id");

-- CreateIndex: the posts with the most likes (ALL), for the ranking's rebuild.
CREATE INDEX "counters_target_type_name_value_target_id_idx" ON "counters"("target_type", "name", "value", "target_id");

-- Backfill from the likes of posts of the last 8 days.
INSERT INTO "like_buckets" ("span", "bucket", "target_id", "likes")
SELECT s.span, to_timestamp(floor(extract(epoch FROM l.created_at) / s.seconds) * s.seconds), l.target_id, count(*)
FROM "likes" l CROSS JOIN (VALUES ('m5', 300), ('h1', 3600), ('h6', 21600)) AS s(span, seconds)
WHERE l.target_type = 'post' AND l.created_at > now() - interval '8 days'
GROUP BY 1, 2, 3;
