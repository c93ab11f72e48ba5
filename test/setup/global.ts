// Starts what the suite needs beside the machine's services: a private Redis
// instance per vitest worker (so counting round trips or flushing disturbs no other
// file, as files run side by side) and a local Redis Cluster. The database is
// migrated by scripts/test.sh.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { freePort } from "../../scripts/lib/ports.js";

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

declare module "vitest" {
  export interface ProvidedContext {
    /** The private Redis servers' ports, one per worker (VITEST_POOL_ID): test/support/env.ts's privateRedisPort(). */
    redisPorts: number[];
    clusterNodes: string[];
    /** Which Redis the service is given: the private one, or the cluster (the project "cluster" of vitest.config.ts). */
    redisMode: "single" | "cluster";
    amqpUrl: string;
  }
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

const rabbitmqctl = (...args: string[]) => execFileSync("rabbitmqctl", args, { stdio: "pipe" });

export default async function setup(project: TestProject): Promise<() => void> {
  // vitest.config.ts's projects each run this; the root, which runs no file, need not.
  if (project.isRootProject()) return () => {};
  // One per worker slot: pool ids run from 1 to maxWorkers across the whole run's projects. One
  // after another, so that no two are offered the same free port.
  const servers: { port: number; child: ChildProcess }[] = [];
  for (let slot = 0; slot < project.vitest.config.maxWorkers; slot++) servers.push(await startPrivateRedis());
  // TEST_CLUSTER_PORT lets two checkouts run their suites side by side.
  // Process tests run the compiled service, as production does (test/support/service-process.ts):
  // built once here (incremental, seconds when nothing changed) rather than compiled by each process.
  execFileSync("bash", ["scripts/build.sh"], { stdio: "inherit" });
  const clusterPort = Number(process.env.TEST_CLUSTER_PORT ?? 7101);
  execFileSync("bash", ["scripts/redis-cluster.sh", "start", String(clusterPort)], { stdio: "inherit" });
  // The cluster outlives a run: each run starts from an empty one, as from a new private Redis. The files
  // that use it then share it one at a time (vitest.config.ts's phases), each with ids of its own.
  for (const port of [0, 1, 2].map((i) => clusterPort + i)) execFileSync("redis-cli", ["-p", String(port), "flushall"], { stdio: "pipe" });

  // Tests stand in for users with small made-up ids (1, 2, … up to some tens of thousands) where
  // only an id matters; users the suite registers get ids far above them, so none inherits
  // the likes or lists a made-up user left in the database or in Redis.
  execFileSync(
    "psql",
    [
      process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/likes_test",
      "-qAtc",
      "SELECT setval('users_id_seq', GREATEST((SELECT last_value FROM users_id_seq), 1000000000))",
    ],
    {
      stdio: "pipe",
    },
  );

  project.provide(
    "redisPorts",
    servers.map((server) => server.port),
  );
  project.provide(
    "clusterNodes",
    [0, 1, 2].map((i) => `127.0.0.1:${clusterPort + i}`),
  );
  // A vhost of the run's own: queues and exchanges of the suite vanish with it.
  const vhost = `likes_test_${process.pid}`;
  rabbitmqctl("add_vhost", vhost);
  rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*");
  project.provide("amqpUrl", `amqp://guest:guest@127.0.0.1:5672/${vhost}`);
  return () => {
    for (const server of servers) server.child.kill("SIGTERM");
    try {
      rabbitmqctl("delete_vhost", vhost);
    } catch {
      // A broker that does not answer leaves the vhost behind, harmless.
    }
  };
}
