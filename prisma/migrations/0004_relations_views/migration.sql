-- AlterTable
ALTER TABLE "counters" ADD COLUMN     "seq" BIGINT NOT NULL DEFAULT 0;

-- like_versions becomes relation_versions: every row so far is a like's.
ALTER TABLE "like_versions" RENAME TO "relation_versions";
ALTER TABLE "relation_versions" RENAME COLUMN "liked" TO "member";
ALTER TABLE "relation_versions" ADD COLUMN "relation" TEXT NOT NULL DEFAULT 'like';
ALTER TABLE "relation_versions" ALTER COLUMN "relation" DROP DEFAULT;
ALTER TABLE "relation_versions" DROP CONSTRAINT "like_versions_pkey";
ALTER TABLE "relation_versions" ADD CONSTRAINT "relation_versions_pkey" PRIMARY KEY ("target_type","target_id","relation","user_id");

-- CreateTable
CREATE TABLE "collects" (
    "target_type" TEXT NOT NULL,
    "target_id" BIGINT NOT NULL,
    "user_id" BIGINT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "collects_pkey" PRIMARY KEY ("target_type","target_id","user_id")
);

-- CreateTable
CREATE TABLE "follows" (
    "followee_id" BIGINT NOT NULL,
    "follower_id" BIGINT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "follows_pkey" PRIMARY KEY ("followee_id","follower_id")
);

-- CreateTable
CREATE TABLE "view_totals" (
    "target_type" TEXT NOT NULL,
    "target_id" BIGINT NOT NULL,
    "epoch" BIGINT NOT NULL,
    "total" BIGINT NOT NULL,
    "version" DECIMAL(38,0) NOT NULL,
    "txid" BIGINT,

    CONSTRAINT "view_totals_pkey" PRIMARY KEY ("target_type","target_id","epoch")
);

-- CreateIndex
CREATE INDEX "collects_user_id_created_at_idx" ON "collects"("user_id", "created_at");

-- CreateIndex
CREATE INDEX "collects_target_type_target_id_created_at_idx" ON "collects"("target_type", "target_id", "created_at");

-- CreateIndex
CREATE INDEX "follows_followee_id_created_at_idx" ON "follows"("followee_id", "created_at");

-- CreateIndex
CREATE INDEX "follows_follower_id_created_at_idx" ON "follows"("follower_id", "created_at");
