-- likes, collects, follows and relation_versions partitioned by hash of their target
-- (target_id; follows' followee_id), so that tables holding years of relations stay in
-- pieces a vacuum, an index build or a restore can take one at a time, and a target's
-- rows and versions sit in one partition each (docs/scaling.md, "Partitioned relations").
--
-- The partition count is read from the setting likes.relation_partitions, which
-- npm run migrate passes as a connection option from RELATION_PARTITIONS; 16 when unset
-- (as under `prisma migrate deploy`). It is fixed once the migration ran: a later
-- change of RELATION_PARTITIONS does nothing to a migrated database.
--
-- Every row is kept: each table is renamed, a partitioned table with the same columns,
-- defaults, primary key and indexes takes its name, the rows are copied over and the old
-- table dropped. The script runs as one transaction (src/stores/postgres/schema-engine.ts
-- sends it whole), holding each old table's ACCESS EXCLUSIVE lock from its rename to the
-- commit: writers and readers of these tables wait for the whole migration. It rewrites
-- each table once; keys and indexes are built after the copy.

SET LOCAL maintenance_work_mem = '256MB';

-- The old tables and their names, which are schema-wide for constraints and indexes.
ALTER TABLE "likes" RENAME TO "likes_unpartitioned";
ALTER TABLE "likes_unpartitioned" RENAME CONSTRAINT "likes_pkey" TO "likes_unpartitioned_pkey";
ALTER INDEX "likes_user_id_created_at_idx" RENAME TO "likes_unpartitioned_user_id_created_at_idx";
ALTER INDEX "likes_target_type_target_id_created_at_idx" RENAME TO "likes_unpartitioned_target_type_target_id_created_at_idx";

ALTER TABLE "collects" RENAME TO "collects_unpartitioned";
ALTER TABLE "collects_unpartitioned" RENAME CONSTRAINT "collects_pkey" TO "collects_unpartitioned_pkey";
ALTER INDEX "collects_user_id_created_at_idx" RENAME TO "collects_unpartitioned_user_id_created_at_idx";
ALTER INDEX "collects_target_type_target_id_created_at_idx" RENAME TO "collects_unpartitioned_target_type_target_id_created_at_idx";

ALTER TABLE "follows" RENAME TO "follows_unpartitioned";
ALTER TABLE "follows_unpartitioned" RENAME CONSTRAINT "follows_pkey" TO "follows_unpartitioned_pkey";
ALTER INDEX "follows_followee_id_created_at_idx" RENAME TO "follows_unpartitioned_followee_id_created_at_idx";
ALTER INDEX "follows_follower_id_created_at_idx" RENAME TO "follows_unpartitioned_follower_id_created_at_idx";

ALTER TABLE "relation_versions" RENAME TO "relation_versions_unpartitioned";
ALTER TABLE "relation_versions_unpartitioned" RENAME CONSTRAINT "relation_versions_pkey" TO "relation_versions_unpartitioned_pkey";

-- The same columns in the same order as before.
CREATE TABLE "likes" (
    "target_type" TEXT NOT NULL,
    "target_id" BIGINT NOT NULL,
    "user_id" BIGINT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP
) PARTITION BY HASH ("target_id");

CREATE TABLE "collects" (
    "target_type" TEXT NOT NULL,
    "target_id" BIGINT NOT NULL,
    "user_id" BIGINT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP
) PARTITION BY HASH ("target_id");

CREATE TABLE "follows" (
    "followee_id" BIGINT NOT NULL,
    "follower_id" BIGINT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP
) PARTITION BY HASH ("followee_id");

CREATE TABLE "relation_versions" (
    "target_type" TEXT NOT NULL,
    "target_id" BIGINT NOT NULL,
    "user_id" BIGINT NOT NULL,
    "version" DECIMAL(38,0) NOT NULL,
    "member" BOOLEAN NOT NULL,
    "txid" BIGINT,
    "relation" TEXT NOT NULL
) PARTITION BY HASH ("target_id");

-- Partitions <table>_p0 … <table>_p(N-1), N from likes.relation_partitions.
DO $$
DECLARE
  requested text := current_setting('likes.relation_partitions', true);
  partitions int;
  parent text;
BEGIN
  IF coalesce(requested, '') = '' THEN
    partitions := 16;
  ELSIF requested ~ '^[0-9]{1,4}$' AND requested::int BETWEEN 1 AND 1024 THEN
    partitions := requested::int;
  ELSE
    RAISE EXCEPTION 'likes.relation_partitions (RELATION_PARTITIONS) must be a whole number from 1 to 1024, not "%"', requested;
  END IF;
  FOREACH parent IN ARRAY ARRAY['likes', 'collects', 'follows', 'relation_versions'] LOOP
    FOR remainder IN 0 .. partitions - 1 LOOP
      EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES WITH (MODULUS %s, REMAINDER %s)', parent || '_p' || remainder, parent, partitions, remainder);
    END LOOP;
  END LOOP;
END $$;

-- The rows, then the keys and indexes (built once over the copied rows, not row by row).
INSERT INTO "likes" ("target_type", "target_id", "user_id", "created_at")
SELECT "target_type", "target_id", "user_id", "created_at" FROM "likes_unpartitioned";
INSERT INTO "collects" ("target_type", "target_id", "user_id", "created_at")
SELECT "target_type", "target_id", "user_id", "created_at" FROM "collects_unpartitioned";
INSERT INTO "follows" ("followee_id", "follower_id", "created_at")
SELECT "followee_id", "follower_id", "created_at" FROM "follows_unpartitioned";
INSERT INTO "relation_versions" ("target_type", "target_id", "user_id", "version", "member", "txid", "relation")
SELECT "target_type", "target_id", "user_id", "version", "member", "txid", "relation" FROM "relation_versions_unpartitioned";

-- Each primary key holds the partition key, as a partitioned table's unique keys must.
ALTER TABLE "likes" ADD CONSTRAINT "likes_pkey" PRIMARY KEY ("target_type","target_id","user_id");
CREATE INDEX "likes_user_id_created_at_idx" ON "likes"("user_id", "created_at");
CREATE INDEX "likes_target_type_target_id_created_at_idx" ON "likes"("target_type", "target_id", "created_at");

ALTER TABLE "collects" ADD CONSTRAINT "collects_pkey" PRIMARY KEY ("target_type","target_id","user_id");
CREATE INDEX "collects_user_id_created_at_idx" ON "collects"("user_id", "created_at");
CREATE INDEX "collects_target_type_target_id_created_at_idx" ON "collects"("target_type", "target_id", "created_at");

-- A user's followers are in one partition (followee_id); whom a user follows is read
-- from every partition by (follower_id, created_at).
ALTER TABLE "follows" ADD CONSTRAINT "follows_pkey" PRIMARY KEY ("followee_id","follower_id");
CREATE INDEX "follows_followee_id_created_at_idx" ON "follows"("followee_id", "created_at");
CREATE INDEX "follows_follower_id_created_at_idx" ON "follows"("follower_id", "created_at");

ALTER TABLE "relation_versions" ADD CONSTRAINT "relation_versions_pkey" PRIMARY KEY ("target_type","target_id","relation","user_id");

DROP TABLE "likes_unpartitioned";
DROP TABLE "collects_unpartitioned";
DROP TABLE "follows_unpartitioned";
DROP TABLE "relation_versions_unpartitioned";

-- Autovacuum analyzes the partitions in its own time and never a partitioned parent:
-- statistics now, so the first plans over the new tables are not guesses.
ANALYZE "likes", "collects", "follows", "relation_versions";
