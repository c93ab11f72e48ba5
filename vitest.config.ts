import { defineConfig } from "vitest/config";

/**
 * The files whose work crosses Redis nodes (likes, relations, lists, views, rankings, live counts,
 * new users' announcements, persisted queries, persistence, rebuild and reconcile) run a second time
 * with the service's Redis a 3-master cluster (REDIS_CLUSTER_NODES), as the project "cluster": of
 * them, the tests that do not depend on where a key lives (input checks, the protocol, the broker,
 * PostgreSQL alone) are written `itOnSingle` and run in "single" only (test/support/env.ts).
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

/**
 * Files whose load would starve their neighbours' deadlines, or whose own deadlines are too short
 * to share the cores: the fault suite's cases, the two-API-two-worker test and the deadlines' own
 * tests, which measure a quarter of a second. They run one at a time, with no other file running.
 * Every other file shares the machine with two others, each on its worker's own database, Redis and
 * Redis Cluster (test/setup/global.ts): no file sees another's data.
 */
const alone = ["test/integration/chaos.test.ts", "test/integration/process/scale-out.test.ts", "test/integration/graphql/deadlines.test.ts"];

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
    // Three files at a time on the suite's two cores: with two, the cores were idle a third of the
    // time, as tests wait for the pipeline, a proxy's cut or a process's start.
    maxWorkers: 3,
    // A worker runs file after file in one process, loading the service's modules once: each file
    // loading them afresh cost more CPU than the files' own tests run in the API. Test files close
    // what they open; what the service keeps per process (caches, a count of password hashes, the
    // default metrics' observers) changes no answer, and tests read the count as a difference.
    isolate: false,
    // The default report, then the slowest files (test/reporters/slowest-files.ts).
    reporters: ["default", "./test/reporters/slowest-files.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Three phases, one after another (sequence.groupOrder):
    //   0. unit tests, and every integration file but those run alone, three at a time, with the
    //      service on its worker's Redis ("single") or on its worker's Redis Cluster ("cluster");
    //   1. one at a time, the files run alone, on a single Redis;
    //   2. one at a time, those of them whose work crosses Redis nodes, on the cluster.
    projects: [
      // Pure functions and in-memory modules: no service is started, so `npm run test:unit` runs them
      // in seconds on a machine without PostgreSQL, Redis or RabbitMQ.
      { extends: true, test: { name: "unit", include: ["test/unit/**/*.test.ts"] } },
      {
        extends: true,
        test: { name: "single", include: ["test/integration/**/*.test.ts"], exclude: alone, provide: { redisMode: "single" }, ...withServices },
      },
      {
        extends: true,
        test: { name: "cluster", include: acrossNodes.filter((file) => !alone.includes(file)), provide: { redisMode: "cluster" }, ...withServices },
      },
      {
        extends: true,
        test: {
          name: "single-alone",
          include: alone,
          fileParallelism: false,
          sequence: { groupOrder: 1 },
          provide: { redisMode: "single" },
          ...withServices,
        },
      },
      {
        extends: true,
        test: {
          name: "cluster-alone",
          include: acrossNodes.filter((file) => alone.includes(file)),
          fileParallelism: false,
          sequence: { groupOrder: 2 },
          provide: { redisMode: "cluster" },
          ...withServices,
        },
      },
    ],
  },
});
