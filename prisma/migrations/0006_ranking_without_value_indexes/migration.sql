-- Indexes on counts that every persist batch moves cost the batch an index update per
-- row (and keep PostgreSQL from updating those rows in place): with them, persisting
-- 200,000 likes ran at 6,756 likes/s against 10,503 without (npm run bench -- persist).
-- They served only the ranking's rebuild, which now reads a bucket through its primary
-- key and the like counters by a scan: a rebuild is rare (Redis lost the ranking).
DROP INDEX "like_buckets_span_bucket_likes_target_id_idx";
DROP INDEX "counters_target_type_name_value_target_id_idx";
