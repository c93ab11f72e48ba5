// npm start refusing to start: a configuration, or a store, that must change first is
// said in one line per process and exit code 78, and nothing is started again.
import { entryPoint } from "../../support/service-process.js";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { testConfig } from "../../support/env.js";

interface Ended {
  readonly code: number | null;
  readonly output: string;
  readonly tookMs: number;
}

/** Runs npm start's entry point with the test configuration and `env` on top, until it exits. */
async function runService(env: Record<string, string>): Promise<Ended> {
  const config = testConfig();
  const startedAt = Date.now();
  const child = spawn(process.execPath, [entryPoint("start")], {
    env: {
      ...process.env,
      DATABASE_URL: config.databaseUrl,
      REDIS_URL: config.redisUrl,
      REDIS_CLUSTER_NODES: "",
      AMQP_URL: config.amqpUrl,
      RABBITMQ_PREFIX: config.rabbitmq.prefix,
      RABBITMQ_QUEUE_TYPE: config.rabbitmq.queueType,
      JWT_SECRET: config.jwtSecret,
      PORT: "0",
      METRICS_PORT: "0",
      LOG_LEVEL: "info",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  // A service that did start (the fix undone) must not outlive the test.
  const timer = setTimeout(() => child.kill("SIGKILL"), 45_000);
  const [code] = (await once(child, "exit")) as [number | null];
  clearTimeout(timer);
  return { code, output, tookMs: Date.now() - startedAt };
}

const lines = (output: string) => output.split("\n").filter((line) => line.trim() !== "");
/** What no log line should look like: a stack trace printed raw, outside a JSON line. */
const rawLines = (output: string) => lines(output).filter((line) => !line.startsWith("{"));

describe("npm start refusing to start", () => {
  it("when production runs on a Redis that keeps nothing across a restart, then each process says so in one line naming the fix, nothing is restarted, and it exits 78", async () => {
    // The suite's private Redis runs without AOF and without replicas.
    const ended = await runService({ NODE_ENV: "production", WEB_CONCURRENCY: "2" });
    expect(ended.code).toBe(78);
    expect(rawLines(ended.output)).toEqual([]);
    const refusals = lines(ended.output).filter((line) => line.includes('"msg":"refusing to start'));
    // Once per process at most (the first refusal stops the others, which may not have got as far): none was started again.
    const pids = refusals.map((line) => (JSON.parse(line) as { pid: number }).pid);
    expect(pids.length).toBeGreaterThan(0);
    expect(new Set(pids).size).toBe(pids.length);
    expect(refusals.every((line) => line.includes("appendonly yes") && line.includes("REDIS_DURABILITY=volatile"))).toBe(true);
    expect(ended.output).not.toContain("starting another");
    expect(lines(ended.output).filter((line) => line.includes('"level":60') && line.includes('"name":"supervisor"'))).toHaveLength(1);
  });

  it("when the configuration is invalid, then the service says which setting in one line and exits 78", async () => {
    const ended = await runService({ PORT: "not-a-port" });
    expect(ended.code).toBe(78);
    expect(rawLines(ended.output)).toEqual([]);
    const all = lines(ended.output);
    expect(all).toHaveLength(1);
    expect(all[0]).toContain("PORT");
    expect(all[0]).toContain("refusing to start");
  });
});
