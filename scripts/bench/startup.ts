// The startup scenario: how long an API process and a worker take from spawn to
// serving, and the memory they hold then, compiled (dist/, as npm start and the
// image run them) against the same sources run through tsx.
import { spawn } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { projectRoot } from "../../src/stores/postgres/schema-engine.js";
import { entryArgs } from "../lib/entries.js";

export interface StartupFigures {
  readonly entry: "api" | "worker";
  readonly runtime: "compiled" | "tsx";
  /** Median over the runs, from spawn to the line that says it serves. */
  readonly readyMs: number;
  /** Median resident memory of the process and its children (tsx's esbuild service) a second after ready. */
  readonly rssMb: number;
}

const readyLine = { api: '"msg":"API process ready"', worker: '"msg":"pipeline running"' } as const;

/** Resident memory of `pid` and every process below it, in MB, from /proc. */
function treeRssMb(pid: number): number {
  const children = new Map<number, number[]>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const ppid = Number(/^PPid:\s+(\d+)/m.exec(readFileSync(`/proc/${name}/status`, "utf8"))?.[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
    } catch {
      // Gone meanwhile.
    }
  }
  let kb = 0;
  const walk = (p: number): void => {
    try {
      kb += Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${p}/status`, "utf8"))?.[1] ?? 0);
    } catch {
      return;
    }
    for (const child of children.get(p) ?? []) walk(child);
  };
  walk(pid);
  return kb / 1024;
}

async function startOnce(args: readonly string[], entry: "api" | "worker", env: Record<string, string>): Promise<{ readyMs: number; rssMb: number }> {
  const startedAt = performance.now();
  const child = spawn(process.execPath, args, {
    cwd: projectRoot,
    env: { ...process.env, ...env, PORT: "0", METRICS_PORT: "0", LOG_LEVEL: "info", NODE_ENV: "development" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let output = "";
  try {
    const readyMs = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${entry} did not start within 60 s:\n${output.slice(-2000)}`)), 60_000);
      child.once("exit", (code) => reject(new Error(`${entry} exited with ${code}:\n${output.slice(-2000)}`)));
      child.stdout.on("data", (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes(readyLine[entry])) {
          clearTimeout(timer);
          resolve(performance.now() - startedAt);
        }
      });
    });
    await sleep(1_000);
    return { readyMs, rssMb: treeRssMb(child.pid as number) };
  } finally {
    child.kill("SIGTERM");
    await new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once("exit", resolve)));
  }
}

const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

/** Each entry point, compiled and through tsx, `runs` times each, one process at a time. */
export async function measureStartup(env: Record<string, string>, runs = 5): Promise<StartupFigures[]> {
  const figures: StartupFigures[] = [];
  for (const entry of ["api", "worker"] as const) {
    const ways = { compiled: entryArgs(entry), tsx: ["--import", "tsx/esm", `src/main/${entry}.ts`] };
    for (const runtime of ["compiled", "tsx"] as const) {
      const samples = [];
      for (let i = 0; i < runs; i++) samples.push(await startOnce(ways[runtime], entry, env));
      figures.push({ entry, runtime, readyMs: Math.round(median(samples.map((s) => s.readyMs))), rssMb: Math.round(median(samples.map((s) => s.rssMb))) });
    }
  }
  return figures;
}
