// Starts what the suite needs beside the machine's services, once per run for all of
// vitest.config.ts's projects: for each vitest worker slot a private Redis, a Redis Cluster and
// a PostgreSQL database of its own, so that two files running side by side never see each
// other's data, counts or flushes. The machine's RabbitMQ gets a vhost of the run's own.
import { execFile, execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type { TestProject } from "vitest/node";
import { freePort } from "../../scripts/lib/ports.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** Per worker slot (VITEST_POOL_ID), from test/support/env.ts's helpers: */
    /** the private Redis's port, */
    redisPorts: number[];
    /** the nodes of the Redis Cluster, */
    clusterNodes: string[][];
    /** and the database's URL. */
    databaseUrls: string[];
    /** Which Redis the service is given: the private one, or the cluster (the projects "cluster" of vitest.config.ts). */
    redisMode: "single" | "cluster";
    amqpUrl: string;
  }
}

interface SuiteStores {
  redisPorts: number[];
  clusterNodes: string[][];
  databaseUrls: string[];
  amqpUrl: string;
  close(): void;
}

const run = promisify(execFile);

async function waitForRedis(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    try {
      execFileSync("redis-cli", ["-p", String(port), "ping"], { stdio: "pipe" });
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error(`private Redis on port ${port} did not start`);
}

/** A Redis of the suite's own: no persistence, no eviction. */
async function startPrivateRedis(): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(
    "redis-server",
    [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--dir",
      mkdtempSync(path.join(tmpdir(), "likes-test-redis-")),
      "--save",
      "",
      "--appendonly",
      "no",
      "--maxmemory-policy",
      "noeviction",
    ],
    { stdio: "ignore" },
  );
  await waitForRedis(port);
  return { port, child };
}

/**
 * A Redis Cluster of three masters on ports first..first+2, started once and kept between runs
 * (scripts/redis-cluster.sh), emptied here: each run starts from an empty cluster, as from a new
 * private Redis.
 */
function startCluster(first: number): string[] {
  execFileSync("bash", ["scripts/redis-cluster.sh", "start", String(first)], { stdio: "inherit" });
  const ports = [0, 1, 2].map((i) => first + i);
  for (const port of ports) execFileSync("redis-cli", ["-p", String(port), "flushall"], { stdio: "pipe" });
  return ports.map((port) => `127.0.0.1:${port}`);
}

/**
 * The worker slot's database beside the one scripts/test.sh migrated (likes_test_1, likes_test_2, …),
 * created when missing and migrated by the compiled `npm run migrate`. Tests stand in for users
 * with small made-up ids (1, 2, … up to some tens of thousands) where only an id matters; users
 * the suite registers get ids far above them, so none inherits the likes or lists a made-up user
 * left in the database or in Redis.
 */
async function prepareDatabase(baseUrl: string, slot: number): Promise<string> {
  const url = new URL(baseUrl);
  url.pathname = `${url.pathname}_${slot}`;
  await run(process.execPath, ["dist/main/migrate.js"], { env: { ...process.env, DATABASE_URL: url.toString() } });
  await run("psql", [url.toString(), "-qAtc", "SELECT setval('users_id_seq', GREATEST((SELECT last_value FROM users_id_seq), 1000000000))"]);
  return url.toString();
}

const rabbitmqctl = (...args: string[]) => execFileSync("rabbitmqctl", args, { stdio: "pipe" });

async function startSuiteStores(workers: number): Promise<SuiteStores> {
  // Process tests run the compiled service, as production does (test/support/service-process.ts):
  // built once here (incremental, seconds when nothing changed) rather than compiled by each process.
  execFileSync("bash", ["scripts/build.sh"], { stdio: "inherit" });
  const slots = Array.from({ length: workers }, (_, slot) => slot + 1);
  // TEST_CLUSTER_PORT lets two checkouts run their suites side by side: each takes three ports per slot from it.
  const firstClusterPort = Number(process.env.TEST_CLUSTER_PORT ?? 7101);
  const clusterNodes = slots.map((slot) => startCluster(firstClusterPort + 3 * (slot - 1)));
  const baseUrl = process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/likes_test";
  const databaseUrls = await Promise.all(slots.map((slot) => prepareDatabase(baseUrl, slot)));
  // Last, so that nothing started is left running when a step before fails (the clusters are kept anyway).
  // One after another, so that no two are offered the same free port.
  const servers: { port: number; child: ChildProcess }[] = [];
  const vhost = `likes_test_${process.pid}`;
  try {
    for (const _ of slots) servers.push(await startPrivateRedis());
    // A vhost of the run's own: queues and exchanges of the suite vanish with it.
    rabbitmqctl("add_vhost", vhost);
    rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*");
  } catch (error) {
    for (const server of servers) server.child.kill("SIGTERM");
    throw error;
  }
  return {
    redisPorts: servers.map((server) => server.port),
    clusterNodes,
    databaseUrls,
    amqpUrl: `amqp://guest:guest@127.0.0.1:5672/${vhost}`,
    close() {
      for (const server of servers) server.child.kill("SIGTERM");
      try {
        rabbitmqctl("delete_vhost", vhost);
      } catch {
        // A broker that does not answer leaves the vhost behind, harmless.
      }
    },
  };
}

/**
 * vitest runs a project's global setup for each project, each in a module instance of its own:
 * the stores are started by the first and shared through the process's global object, which all
 * of them see, and closed by whichever teardown comes first (all files have run by then).
 */
const shared = Symbol.for("likes-test-suite-stores");
type WithStores = typeof globalThis & { [shared]?: Promise<SuiteStores> };

export default async function setup(project: TestProject): Promise<() => void> {
  // The root, which runs no file, needs none.
  if (project.isRootProject()) return () => {};
  const global = globalThis as WithStores;
  // Pool ids run up to the largest maxWorkers of a project (a command line's --maxWorkers sets the root's only).
  global[shared] ??= startSuiteStores(Math.max(...project.vitest.projects.map((each) => each.config.maxWorkers))).catch((error: unknown) => {
    // A later run in the same process (watch mode) tries again.
    delete global[shared];
    throw error;
  });
  const stores = await global[shared];
  project.provide("redisPorts", stores.redisPorts);
  project.provide("clusterNodes", stores.clusterNodes);
  project.provide("databaseUrls", stores.databaseUrls);
  project.provide("amqpUrl", stores.amqpUrl);
  return () => {
    if (global[shared] === undefined) return;
    delete global[shared];
    stores.close();
  };
}
