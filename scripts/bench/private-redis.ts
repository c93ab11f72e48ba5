// The bench's own Redis: a private server (so commands, bytes and CPU are the
// benchmark's alone) or a private Redis Cluster, and what each has done, from INFO.
import { execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createServer } from "node:net";
import { Cluster, Redis } from "ioredis";
import { createRedisClient, type RedisClient } from "../../src/stores/redis/client.js";
import { projectRoot } from "../../src/stores/postgres/schema-engine.js";
import { freePort } from "../lib/ports.js";
import { waitFor } from "./harness.js";

/** What a Redis server has done since it started, from INFO. */
export interface RedisCounters {
  /** Commands executed, those run inside scripts included. */
  readonly commands: number;
  /** Calls of each command (INFO commandstats), those run inside scripts included. */
  readonly byCommand: ReadonlyMap<string, number>;
  /** Network reads: about one per round trip on a quiet server. */
  readonly reads: number;
  readonly bytesIn: number;
  readonly bytesOut: number;
  /** CPU time of the server, user and system, in seconds. */
  readonly cpuSeconds: number;
}

/** A Redis of the bench's own that the HTTP scenarios run against: one server, or every master of a cluster. */
export interface BenchRedis {
  /** What the tables call it. */
  readonly label: string;
  /** What the service is told to reach it by (REDIS_URL, or REDIS_CLUSTER_NODES). */
  readonly env: Readonly<Record<string, string>>;
  readonly client: RedisClient;
  /** How many servers counters() and info() ask: each call counts one INFO command and one read of the bench's own on each. */
  readonly servers: number;
  /** The INFO section of every server. */
  info(section: string): Promise<string[]>;
  /** The servers' counters, summed. */
  counters(): Promise<RedisCounters>;
  stop(): Promise<void>;
}

export interface PrivateRedis extends BenchRedis {
  readonly port: number;
  readonly url: string;
  readonly client: Redis;
}

function sumCounters(each: readonly RedisCounters[]): RedisCounters {
  const sum = (field: Exclude<keyof RedisCounters, "byCommand">) => each.reduce((total, c) => total + c[field], 0);
  const byCommand = new Map<string, number>();
  for (const c of each) for (const [name, calls] of c.byCommand) byCommand.set(name, (byCommand.get(name) ?? 0) + calls);
  return { commands: sum("commands"), byCommand, reads: sum("reads"), bytesIn: sum("bytesIn"), bytesOut: sum("bytesOut"), cpuSeconds: sum("cpuSeconds") };
}

export function parseRedisCounters(info: string): RedisCounters {
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, "m").exec(info)?.[1] ?? 0);
  let commands = 0;
  const byCommand = new Map<string, number>();
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    commands += Number(match[2]);
    byCommand.set(match[1] as string, Number(match[2]));
  }
  return {
    commands,
    byCommand,
    reads: field("total_reads_processed"),
    bytesIn: field("total_net_input_bytes"),
    bytesOut: field("total_net_output_bytes"),
    cpuSeconds: field("used_cpu_user") + field("used_cpu_sys"),
  };
}

/** Starts a redis-server with `args` in `dir`, killed when this process exits. */
function spawnRedis(port: number, dir: string, args: readonly string[]) {
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--maxmemory-policy", "noeviction", "--repl-diskless-sync-delay", "0", ...args],
    { stdio: "ignore" },
  );
  // Nor the private Redis.
  const orphaned = () => child.kill("SIGTERM");
  process.once("exit", orphaned);
  return {
    async stop() {
      process.off("exit", orphaned);
      child.kill("SIGTERM");
      await once(child, "exit");
    },
  };
}

/**
 * A Redis of the bench's own, with the persistence `npm start` gives its Redis (AOF,
 * fsync every second), in a directory of its own that is removed when it stops;
 * with `replica`, a replica of it too (in sync before this resolves).
 */
export async function startPrivateRedis(options: { replica?: boolean } = {}): Promise<PrivateRedis> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), "likes-bench-redis-"));
  const servers = [spawnRedis(port, dir, ["--appendonly", "yes", "--appendfsync", "everysec"])];
  const url = `redis://127.0.0.1:${port}`;
  const client = createRedisClient({ url });
  if (!(client instanceof Redis)) throw new Error("expected a standalone Redis client");
  // Refused connections while the server starts are expected; waitFor retries them.
  client.on("error", () => {});
  await waitFor(async () => {
    await client.connect().catch(() => undefined);
    return (await client.ping()) === "PONG";
  }, "private Redis");
  if (options.replica) {
    const replicaDir = path.join(dir, "replica");
    mkdirSync(replicaDir);
    servers.push(spawnRedis(await freePort(), replicaDir, ["--appendonly", "no", "--replicaof", "127.0.0.1", String(port)]));
    await waitFor(async () => /^connected_slaves:1$/m.test(await client.info("replication")), "the private Redis's replica");
  }
  return {
    label: "single",
    env: { REDIS_URL: url },
    servers: 1,
    port,
    url,
    client,
    info: async (section) => [await client.info(section)],
    counters: async () => parseRedisCounters(await client.info("all")),
    async stop() {
      client.disconnect();
      await Promise.all(servers.map((server) => server.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** The first of three consecutive ports from `from` on that are free, with their cluster bus ports (port + 10,000). */
async function freeClusterPorts(from: number): Promise<number> {
  for (let first = from; first < from + 300; first += 3) {
    const ports = [first, first + 1, first + 2].flatMap((port) => [port, port + 10_000]);
    if ((await Promise.all(ports.map(portIsFree))).every(Boolean)) return first;
  }
  throw new Error(`no three free ports (and their bus ports) between ${from} and ${from + 300} for the bench's Redis Cluster; stop what holds them`);
}

/**
 * A 3-master Redis Cluster of the bench's own (scripts/redis-cluster.sh on free
 * ports from 7301 on, above the test suite's 7101–7109, so a bench and the suite
 * can run at once), empty, without AOF (the private Redis has AOF).
 */
export async function startPrivateCluster(): Promise<BenchRedis> {
  const first = await freeClusterPorts(7301);
  const script = (action: "start" | "stop") =>
    execFileSync("bash", ["scripts/redis-cluster.sh", action, String(first)], { cwd: projectRoot, stdio: ["ignore", 2, 2] });
  // A bench that dies on an error must not leave the cluster's daemons running.
  const orphaned = () => script("stop");
  process.once("exit", orphaned);
  try {
    script("start");
  } catch (error) {
    process.off("exit", orphaned);
    script("stop");
    throw error;
  }
  const nodes = [first, first + 1, first + 2].map((port) => `127.0.0.1:${port}`);
  const client = createRedisClient({ url: `redis://${nodes[0]}`, clusterNodes: nodes });
  if (!(client instanceof Cluster)) throw new Error("expected a Redis Cluster client");
  client.on("error", () => {});
  await client.connect();
  const masters = client.nodes("master");
  if (masters.length !== 3) throw new Error(`the bench's Redis Cluster has ${masters.length} masters, expected 3; see .state/redis-cluster/*/redis.log`);
  const info = (section: string) => Promise.all(client.nodes("master").map((node) => node.info(section)));
  return {
    label: "cluster",
    // The cluster keeps nothing on disk (scripts/redis-cluster.sh); the service refuses such a Redis in production unless told.
    env: { REDIS_CLUSTER_NODES: nodes.join(","), REDIS_DURABILITY: "volatile" },
    servers: masters.length,
    client,
    info,
    counters: async () => sumCounters((await info("all")).map(parseRedisCounters)),
    async stop() {
      process.off("exit", orphaned);
      client.disconnect();
      script("stop");
    },
  };
}
