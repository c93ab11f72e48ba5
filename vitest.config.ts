import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/setup/global.ts"],
    // Files run one after another: several stop or count a shared service
    // (Redis round trips, broker restarts), which parallel files would disturb.
    fileParallelism: false,
    // The suite's own database, also when vitest is run without scripts/test.sh.
    env: { DATABASE_URL: process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/likes_test" },
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
