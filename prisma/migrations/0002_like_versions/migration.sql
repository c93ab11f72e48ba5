-- CreateTable
CREATE TABLE "like_versions" (
    "target_type" TEXT NOT NULL,
    "target_id" BIGINT NOT NULL,
    "user_id" BIGINT NOT NULL,
    "version" BIGINT NOT NULL,
    "liked" BOOLEAN NOT NULL,

    CONSTRAINT "like_versions_pkey" PRIMARY KEY ("target_type","target_id","user_id")
);
