// Redis servers of a test's own (primaries, replicas, Sentinels), for what the
// suite's shared Redis cannot show: replication, failovers, a replica paused.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { freePort } from "../../scripts/lib/ports.js";

/** Waits until `check` answers something truthy, asking every 100 ms; fails after `timeoutMs`. */
export async function until<T>(what: string, check: () => Promise<T | null | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await check().catch(() => null);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export interface RedisServers {
  /** Where servers keep their files. */
  readonly dir: string;
  /** Starts `redis-server` with `args`; killed by stop(). */
  serve(args: readonly string[]): ChildProcess;
  /** Starts a server on a free port, a replica of `primaryPort` when given; its port once it answers (and, a replica, is in sync). */
  start(options?: { replicaOf?: number }): Promise<number>;
  /** Pauses the server on `port` (SIGSTOP): it holds its connections and answers nothing. */
  pause(port: number): void;
  /** Lets a paused server go on (SIGCONT). */
  resume(port: number): void;
  /** Kills the server on `port` at once (SIGKILL), as a crash would. */
  kill(port: number): void;
  /** Kills every server and removes their files. */
  stop(): void;
}

/** Settings every server takes: no files beyond its directory, no eviction, a replica syncs at once. */
const common = (dir: string) => [
  "--bind",
  "127.0.0.1",
  "--save",
  "",
  "--appendonly",
  "no",
  "--maxmemory-policy",
  "noeviction",
  // Redis waits 5 s by default for more replicas to share a sync.
  "--repl-diskless-sync-delay",
  "0",
  "--dir",
  dir,
];

export function redisServers(): RedisServers {
  const dir = mkdtempSync(path.join(tmpdir(), "likes-redis-"));
  const children: ChildProcess[] = [];
  const byPort = new Map<number, ChildProcess>();
  const signal = (port: number, name: NodeJS.Signals) => {
    if (!byPort.get(port)?.kill(name)) throw new Error(`no Redis of this test on port ${port}`);
  };
  const serve = (args: readonly string[]) => {
    const child = spawn("redis-server", args, { stdio: "ignore" });
    children.push(child);
    return child;
  };
  return {
    dir,
    serve,
    async start(options = {}) {
      const port = await freePort();
      const replicaOf = options.replicaOf === undefined ? [] : ["--replicaof", "127.0.0.1", String(options.replicaOf)];
      byPort.set(port, serve(["--port", String(port), ...replicaOf, ...common(dir)]));
      const client = new Redis({ port, lazyConnect: true, maxRetriesPerRequest: 0 });
      // Refused until the server listens: asked again.
      client.on("error", () => {});
      try {
        await until(`the Redis on ${port} answers${replicaOf.length ? " and is in sync" : ""}`, async () =>
          replicaOf.length ? (await client.info("replication")).includes("master_link_status:up") : (await client.ping()) === "PONG",
        );
      } finally {
        client.disconnect();
      }
      return port;
    },
    pause: (port) => signal(port, "SIGSTOP"),
    resume: (port) => signal(port, "SIGCONT"),
    kill: (port) => signal(port, "SIGKILL"),
    stop() {
      for (const child of children) child.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
