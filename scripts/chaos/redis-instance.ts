// A redis-server of the fault suite's own, on a free port with its files in a
// temporary directory, so killing, freezing or restarting it disturbs nobody.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { freeClusterPort, freePort } from "../lib/ports.js";

const run = promisify(execFile);

export interface RedisInstance {
  readonly port: number;
  readonly url: string;
  /** Whether it appends every write to an AOF (fsynced every second). */
  readonly appendOnly: boolean;
  /** Its `maxmemory` as given to it, or null for none. */
  readonly maxMemory: string | null;
  /** SIGKILL, then the same server again on the same port and directory: what survives is what its files kept. */
  crashAndRestart(downMs: number): Promise<void>;
  /** SIGKILL, and no restart: a primary lost for good, as before a failover. */
  crash(): Promise<void>;
  /** SIGSTOP: the server keeps its connections and answers nothing until `thaw`. */
  freeze(): void;
  thaw(): void;
  stop(): Promise<void>;
}

async function answers(port: number): Promise<boolean> {
  try {
    const { stdout } = await run("redis-cli", ["-p", String(port), "ping"], { timeout: 2_000 });
    // A server still loading its AOF answers LOADING, not PONG.
    return stdout.trim() === "PONG";
  } catch {
    return false;
  }
}

export async function startRedisInstance(options: {
  appendOnly: boolean;
  maxMemory?: string | undefined;
  /** The port of a primary to replicate. */
  replicaOf?: number;
  /** A node of a Redis Cluster (not yet joined): it sees a master down after 2 s, as the fleet did. */
  clusterNode?: boolean;
}): Promise<RedisInstance> {
  const port = options.clusterNode ? await freeClusterPort() : await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), "likes-chaos-redis-"));
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--dir",
    dir,
    "--save",
    "",
    "--appendonly",
    options.appendOnly ? "yes" : "no",
    "--appendfsync",
    "everysec",
    // The outbox holds likes not yet persisted: nothing may be evicted.
    "--maxmemory-policy",
    "noeviction",
    ...(options.maxMemory ? ["--maxmemory", options.maxMemory] : []),
    // A replica syncs at once (Redis waits 5 s by default for more replicas to share a sync).
    "--repl-diskless-sync-delay",
    "0",
    ...(options.replicaOf === undefined ? [] : ["--replicaof", "127.0.0.1", String(options.replicaOf)]),
    ...(options.clusterNode ? ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"] : []),
  ];
  let child: ChildProcess | undefined;
  const orphaned = () => {
    child?.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  process.on("exit", orphaned);

  async function start(): Promise<void> {
    child = spawn("redis-server", args, { stdio: "ignore" });
    for (let i = 0; i < 200; i++) {
      if (await answers(port)) return;
      await sleep(50);
    }
    throw new Error(`the chaos suite's Redis on port ${port} did not answer within 10 s`);
  }
  async function kill(signal: NodeJS.Signals): Promise<void> {
    const current = child;
    if (!current || current.exitCode !== null || current.signalCode !== null) return;
    const exited = once(current, "exit");
    current.kill(signal);
    await exited;
  }

  await start();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    appendOnly: options.appendOnly,
    maxMemory: options.maxMemory ?? null,
    async crashAndRestart(downMs) {
      await kill("SIGKILL");
      await sleep(downMs);
      await start();
    },
    crash: () => kill("SIGKILL"),
    freeze: () => child?.kill("SIGSTOP"),
    thaw: () => child?.kill("SIGCONT"),
    async stop() {
      child?.kill("SIGCONT");
      await kill("SIGKILL");
      process.off("exit", orphaned);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
