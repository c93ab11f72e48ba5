// Three Redis Sentinels (redis-server --sentinel) watching one primary, for the tests
// and the fault suite: they see it down after 1 s and promote a replica.
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { freePort } from "./ports.js";

export interface Sentinels {
  readonly ports: readonly number[];
  /** Kills every Sentinel. */
  stop(): void;
}

/** Starts three Sentinels on free ports, their files in `dir`, watching the primary on `primaryPort` as `name`. */
export async function startSentinels(dir: string, name: string, primaryPort: number): Promise<Sentinels> {
  const children: ChildProcess[] = [];
  const ports: number[] = [];
  for (let i = 0; i < 3; i++) {
    const port = await freePort();
    const conf = path.join(dir, `sentinel-${port}.conf`);
    writeFileSync(
      conf,
      [
        `port ${port}`,
        "bind 127.0.0.1",
        `dir ${dir}`,
        `sentinel monitor ${name} 127.0.0.1 ${primaryPort} 2`,
        `sentinel down-after-milliseconds ${name} 1000`,
        `sentinel failover-timeout ${name} 10000`,
        "",
      ].join("\n"),
    );
    children.push(spawn("redis-server", [conf, "--sentinel"], { stdio: "ignore" }));
    ports.push(port);
  }
  const stop = () => children.forEach((child) => child.kill("SIGKILL"));
  process.once("exit", stop);
  return { ports, stop };
}
