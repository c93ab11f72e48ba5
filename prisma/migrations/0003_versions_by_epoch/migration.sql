-- AlterTable
ALTER TABLE "like_versions" ADD COLUMN     "txid" BIGINT,
ALTER COLUMN "version" SET DATA TYPE DECIMAL(38,0);

-- CreateTable
CREATE TABLE "target_epochs" (
    "target_type" TEXT NOT NULL,
    "target_id" BIGINT NOT NULL,
    "epoch" BIGINT NOT NULL,

    CONSTRAINT "target_epochs_pkey" PRIMARY KEY ("target_type","target_id")
);
