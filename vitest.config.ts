import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: {
    // Node loads graphql's CommonJS build (its package has no "exports"), for our code and for
    // the libraries alike; Vite would hand our code the .mjs build instead, and graphql's
    // instanceof checks then fail between the two copies ("from another module or realm").
    alias: [{ find: /^graphql$/, replacement: "graphql/index.js" }],
  },
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/setup/global.ts"],
    setupFiles: ["test/setup/per-file.ts"],
    // Files run one after another: several stop or count a shared service
    // (Redis round trips, broker restarts), which parallel files would disturb.
    fileParallelism: false,
    // The suite's own database, also when vitest is run without scripts/test.sh.
    env: { DATABASE_URL: process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/likes_test" },
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
