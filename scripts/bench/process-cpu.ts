// CPU and memory of processes, read from /proc: the service's processes, the
// machine's RabbitMQ and PostgreSQL servers, and the machine as a whole.
import { readdirSync, readFileSync } from "node:fs";

/** CPU seconds (user + system) a process has used, from /proc; 0 once it is gone. */
export function cpuSecondsOf(pid: number): number {
  try {
    // Fields after the command name, which is in parentheses and may hold spaces.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

export function peakRssKbOf(pid: number): number {
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
export function processTree(root: number): number[] {
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
