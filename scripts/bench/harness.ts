// What every benchmark run needs: a private Redis (so commands, bytes and CPU
// are the benchmark's alone) or a private Redis Cluster, its own database, and
// the service started as `npm start` starts it, with the CPU of each of its
// processes read from /proc.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createServer } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { Cluster, Redis } from "ioredis";
import { createRedisClient, type RedisClient } from "../../src/stores/redis/client.js";
import { migrate } from "../../src/stores/postgres/migrate.js";
import { projectRoot } from "../../src/stores/postgres/schema-engine.js";
import { entryArgs } from "../lib/entries.js";
import { freePort } from "../lib/ports.js";

export const benchSecret = "bench-secret-not-for-production-use";
export const partitions = 1024;

async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await sleep(100);
  }
  throw new Error(`${what} did not come up within ${timeoutMs / 1000} s`);
}

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
 * ports from 7301 on, above the test suite's 7101–7103, so a bench and the suite
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

export async function prepareDatabase(url: string): Promise<pg.Client> {
  await migrate(url);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

/** CPU seconds (user + system) a process has used, from /proc; 0 once it is gone. */
function cpuSecondsOf(pid: number): number {
  try {
    // Fields after the command name, which is in parentheses and may hold spaces.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

function peakRssKbOf(pid: number): number {
  try {
    return Number(/^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** CPU seconds the whole machine has run anything (every core; not idle, I/O wait or stolen by the hypervisor), from /proc/stat. */
export function machineBusySeconds(): number {
  const fields = (/^cpu\s+(.*)$/m.exec(readFileSync("/proc/stat", "utf8"))?.[1] ?? "").trim().split(/\s+/).map(Number);
  // user nice system idle iowait irq softirq steal …; guest time is already in user and nice.
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0] = fields;
  return (user + nice + system + irq + softirq) / 100;
}

/** A process and all its descendants. */
function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const parent = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
    } catch {
      // Gone meanwhile.
    }
  }
  const tree: number[] = [];
  const visit = (pid: number) => {
    tree.push(pid);
    for (const child of children.get(pid) ?? []) visit(child);
  };
  visit(root);
  return tree;
}

/** Pids of the processes whose command line contains `pattern`, with their descendants (PostgreSQL's backends). */
function processesMatching(pattern: string): number[] {
  const roots: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(pattern)) roots.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return [...new Set(roots.flatMap(processTree))];
}

/** CPU seconds per process, of the machine's RabbitMQ and PostgreSQL servers, which share the cores with the service. */
export interface OtherServersCpu {
  readonly rabbitmq: ReadonlyMap<number, number>;
  readonly postgres: ReadonlyMap<number, number>;
}

export function otherServersCpu(): OtherServersCpu {
  const of = (pids: number[]) => new Map(pids.map((pid) => [pid, cpuSecondsOf(pid)]));
  return { rabbitmq: of(processesMatching("beam.smp")), postgres: of(processesMatching("bin/postgres")) };
}

/** CPU seconds used between two samples by the processes alive at both (a backend that exited took its count with it). */
export function cpuBetween(before: ReadonlyMap<number, number>, after: ReadonlyMap<number, number>): number {
  let total = 0;
  for (const [pid, seconds] of after) total += before.has(pid) ? seconds - (before.get(pid) as number) : 0;
  return total;
}

const isPipelineProcess = (pid: number) => {
  try {
    return /(src\/(main\/)?worker\.ts|dist\/(main\/)?worker\.js)/.test(readFileSync(`/proc/${pid}/cmdline`, "utf8"));
  } catch {
    return false;
  }
};

/** CPU seconds used so far by the service's API processes and by its pipeline process. */
export interface ServiceCpu {
  readonly api: number;
  readonly pipeline: number;
  readonly apiProcesses: number;
}

export interface RunningService {
  readonly url: string;
  /** Where the service's metrics are served, summed over its processes (Prometheus text). */
  readonly metricsUrl: string;
  cpu(): ServiceCpu;
  /** The largest resident set any one process of the service has had, in MB (the kernel's VmHWM). */
  peakRssMb(): number;
  stop(): Promise<void>;
}

export type ServiceMode = "npm start" | "API only";

/** The value of each sample of a Prometheus text exposition, by its name and labels as written ("name{le=\"0.1\"}"). */
export async function scrapeMetrics(url: string): Promise<Map<string, number>> {
  const samples = new Map<string, number>();
  const text = await fetch(url).then(
    (response) => (response.ok ? response.text() : ""),
    () => "",
  );
  for (const line of text.split("\n")) {
    const match = /^([a-zA-Z_:][\w:]*(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (match) samples.set(match[1] as string, Number(match[2]));
  }
  return samples;
}

/**
 * Starts the service the way `npm start` does (`node dist/main/start.js`,
 * the API on every core and the persistence pipeline beside it), or with
 * `PIPELINE=off` for the API alone; production settings, quiet logs.
 */
export async function startService(
  mode: ServiceMode,
  env: Record<string, string>,
  options: { readonly profileDir?: string; readonly directory?: string } = {},
): Promise<RunningService> {
  const { profileDir, directory = projectRoot } = options;
  const port = await freePort();
  const metricsPort = await freePort();
  // Every process of the service inherits these flags, so each writes its own CPU profile when it stops.
  const profile = profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [];
  const child: ChildProcess = spawn(process.execPath, [...profile, ...entryArgs("start", directory)], {
    cwd: directory,
    env: {
      ...process.env,
      RABBITMQ_PREFIX: "likes_bench",
      RECONCILE_CRON: "off",
      // Every bench request comes from 127.0.0.1: per-address budgets would measure the limiter, not the service.
      RATE_LIMIT_IP_MUTATIONS: "0",
      RATE_LIMIT_IP_SIGN_INS: "0",
      RATE_LIMIT_IP_QUERY_COST: "0",
      ...env,
      PIPELINE: mode === "npm start" ? "embedded" : "off",
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
      LOG_LEVEL: "warn",
      NODE_ENV: "production",
      JWT_SECRET: benchSecret,
    },
    stdio: ["ignore", "inherit", "inherit"],
  });
  const exited = once(child, "exit");
  // A bench that dies on an error must not leave the service running.
  const orphaned = () => child.kill("SIGTERM");
  process.once("exit", orphaned);
  const url = `http://127.0.0.1:${port}/graphql`;
  await waitFor(
    async () => (await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: '{"query":"{__typename}"}' })).ok,
    "the service",
  );
  return {
    url,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    cpu() {
      const tree = processTree(child.pid as number);
      let api = 0;
      let pipeline = 0;
      let apiProcesses = 0;
      for (const pid of tree) {
        if (isPipelineProcess(pid)) pipeline += cpuSecondsOf(pid);
        else {
          api += cpuSecondsOf(pid);
          apiProcesses++;
        }
      }
      return { api, pipeline, apiProcesses };
    },
    peakRssMb() {
      return Math.max(0, ...processTree(child.pid as number).map(peakRssKbOf)) / 1024;
    },
    async stop() {
      process.off("exit", orphaned);
      child.kill("SIGTERM");
      await exited;
    },
  };
}
