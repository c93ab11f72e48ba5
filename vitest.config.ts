import { defineConfig } from "vitest/config";

/**
 * The suites that cross Redis nodes (likes, relations, lists, views, rankings, live counts,
 * new users' announcements, persisted queries, persistence, rebuild and reconcile) run a second time with the
 * service's Redis a 3-master cluster (REDIS_CLUSTER_NODES), as the project "cluster": the
 * rest test HTTP, limits and faults, which do not depend on where a key lives.
 */
const acrossNodes = [
  "test/integration/graphql/likes.test.ts",
  "test/integration/graphql/collects-follows.test.ts",
  "test/integration/graphql/lists.test.ts",
  "test/integration/graphql/views.test.ts",
  "test/integration/graphql/hot-posts.test.ts",
  "test/integration/graphql/live-counts.test.ts",
  "test/integration/graphql/hot-counts.test.ts",
  "test/integration/graphql/known-users.test.ts",
  "test/integration/graphql/persisted-queries.test.ts",
  "test/integration/pipeline/persistence.test.ts",
  "test/integration/pipeline/persist-batch.test.ts",
  "test/integration/pipeline/relations.test.ts",
  "test/integration/pipeline/rebuild.test.ts",
  "test/integration/pipeline/reconcile.test.ts",
  "test/integration/pipeline/reconcile-counters.test.ts",
  "test/integration/pipeline/reconcile-drift.test.ts",
  "test/integration/pipeline/reconcile-lists.test.ts",
  "test/integration/pipeline/rankings.test.ts",
  "test/integration/process/scale-out.test.ts",
];

/** The services integration tests run against, started once for the run, and each file's cleanup. */
const withServices = { globalSetup: ["test/setup/global.ts"], setupFiles: ["test/setup/per-file.ts"] };

export default defineConfig({
  resolve: {
    // Node loads graphql's CommonJS build (its package has no "exports"), for our code and for
    // the libraries alike; Vite would hand our code the .mjs build instead, and graphql's
    // instanceof checks then fail between the two copies ("from another module or realm").
    alias: [{ find: /^graphql$/, replacement: "graphql/index.js" }],
  },
  test: {
    // Files run one after another: several count a service's work (Redis round
    // trips) or cut it through a proxy, which parallel files would disturb.
    fileParallelism: false,
    // The suite's own database, also when vitest is run without scripts/test.sh.
    env: { DATABASE_URL: process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/likes_test" },
    // The default report, then the slowest files (test/reporters/slowest-files.ts).
    reporters: ["default", "./test/reporters/slowest-files.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      // Pure functions and in-memory modules: no service is started, so `npm run test:unit` runs them
      // in seconds on a machine without PostgreSQL, Redis or RabbitMQ.
      { extends: true, test: { name: "unit", include: ["test/unit/**/*.test.ts"] } },
      { extends: true, test: { name: "single", include: ["test/integration/**/*.test.ts"], provide: { redisMode: "single" }, ...withServices } },
      { extends: true, test: { name: "cluster", include: acrossNodes, provide: { redisMode: "cluster" }, ...withServices } },
    ],
  },
});
