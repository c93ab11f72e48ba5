// The service's processes started the way users start them: node on a compiled
// entry of dist/ (server = npm start's supervisor, api and worker alone,
// reconcile = npm run reconcile), output appended to a log
// file kept as evidence. Each runs in a process group of its own, so stopping
// one also stops the processes it forked, and nothing else.
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { closeSync, openSync, readdirSync, readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { entryArgs } from "../lib/entries.js";
import { projectRoot } from "../../src/stores/postgres/schema-engine.js";

export type Entry = "start" | "api" | "worker" | "reconcile";

export interface ServiceProcess {
  readonly entry: Entry;
  readonly pid: number;
  /** Resolves with the exit code (null when killed by a signal). */
  readonly exited: Promise<number | null>;
  /** SIGKILL to the process alone, as a crash: its children notice the loss themselves. */
  crash(): Promise<void>;
  /** SIGTERM and wait; what is left of the group after `timeoutMs` is killed. */
  stop(timeoutMs?: number): Promise<void>;
}

const running = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of running) killGroup(child, "SIGKILL");
});

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-(child.pid as number), signal);
  } catch {
    // The group is gone.
  }
}

const alive = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

let built = false;

/**
 * Compiles the service once, before the suite starts anything. A build blocks this
 * process for seconds, and the suite's TCP proxies live in it: a build while the
 * service runs would stall every connection through them, which the service's Redis
 * client rightly takes for a dead one. Every case then runs the same code, too.
 */
export function buildEntries(): void {
  entryArgs("start");
  built = true;
}

export function startEntry(entry: Entry, env: Record<string, string>, logFile: string): ServiceProcess {
  const fd = openSync(logFile, "a");
  const child = spawn(process.execPath, entryArgs(entry, projectRoot, !built), {
    cwd: projectRoot,
    env: { ...process.env, ...env },
    stdio: ["ignore", fd, fd],
    detached: true,
  });
  closeSync(fd);
  running.add(child);
  const exited = new Promise<number | null>((resolve) => {
    child.once("exit", (code) => {
      running.delete(child);
      resolve(code);
    });
  });
  return {
    entry,
    pid: child.pid as number,
    exited,
    async crash() {
      if (!alive(child)) return;
      child.kill("SIGKILL");
      await exited;
    },
    async stop(timeoutMs = 20_000) {
      if (alive(child)) {
        child.kill("SIGTERM");
        await Promise.race([exited, sleep(timeoutMs)]);
      }
      // Leftovers of a supervisor that did not finish stopping, or of a crashed one.
      killGroup(child, "SIGKILL");
      if (alive(child)) await once(child, "exit");
    },
  };
}

/** Waits until GraphQL answers at `url`; fails early when `process` exits. */
export async function waitUntilServing(url: string, process: ServiceProcess, logFile: string, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void process.exited.then(() => (exited = true));
  while (Date.now() < deadline && !exited) {
    try {
      const response = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"query":"{__typename}"}',
        signal: AbortSignal.timeout(2_000),
      });
      if (response.ok) return;
    } catch {
      // Not listening yet.
    }
    await sleep(200);
  }
  throw new Error(`${process.entry} did not serve ${url} ${exited ? "(it exited)" : `within ${timeoutMs / 1000} s`}; its log:\n${tail(logFile)}`);
}

/** Waits until the log shows `line` after byte `from`; fails early when `process` exits. */
export async function waitForLogLine(logFile: string, line: string, from: number, process: ServiceProcess, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void process.exited.then(() => (exited = true));
  while (Date.now() < deadline && !exited) {
    if (readFileSync(logFile).subarray(from).toString().includes(line)) return;
    await sleep(200);
  }
  throw new Error(`${process.entry} did not log "${line}" ${exited ? "(it exited)" : `within ${timeoutMs / 1000} s`}; its log:\n${tail(logFile)}`);
}

export function tail(logFile: string, lines = 20): string {
  try {
    return readFileSync(logFile, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

export interface ProcessInfo {
  readonly pid: number;
  readonly ppid: number;
  /** Its process group: a service process started here leads a group of its own. */
  readonly group: number;
  /** Its command line, arguments separated by spaces. */
  readonly command: string;
}

/**
 * Processes running now, zombies left out: a child whose parent exited first may
 * wait a while to be reaped, and has stopped all the same. Read from /proc.
 */
export function runningProcesses(): ProcessInfo[] {
  const found: ProcessInfo[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // The command name is in parentheses and may hold spaces: fields start after the last ")".
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] === "Z" || fields[0] === "X") continue;
      const command = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ").trim();
      found.push({ pid: Number(entry), ppid: Number(fields[1]), group: Number(fields[2]), command });
    } catch {
      // Gone between the listing and the read.
    }
  }
  return found;
}

/** The processes of `process`'s group still running: itself and everything it started. */
export const groupOf = (process: ServiceProcess) => runningProcesses().filter((p) => p.group === process.pid);
