// What every benchmark run needs besides its Redis (private-redis.ts): its own
// database, and the service started as `npm start` starts it, with the CPU of
// each of its processes read from /proc (process-cpu.ts).
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { migrate } from "../../src/stores/postgres/migrate.js";
import { projectRoot } from "../../src/stores/postgres/schema-engine.js";
import { entryArgs } from "../lib/entries.js";
import { freePort } from "../lib/ports.js";
import { cpuSecondsOf, peakRssKbOf, processTree } from "./process-cpu.js";

export const benchSecret = "bench-secret-not-for-production-use";
export const partitions = 1024;

export async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await sleep(100);
  }
  throw new Error(`${what} did not come up within ${timeoutMs / 1000} s`);
}

export async function prepareDatabase(url: string): Promise<pg.Client> {
  await migrate(url);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
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
