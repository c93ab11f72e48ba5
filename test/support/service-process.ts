// The service as a separate process (npm start's entry point), for tests that kill or signal it.
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import type { Config } from "../../src/config.js";

export interface ServiceProcess {
  readonly url: string;
  readonly child: ChildProcess;
  output(): string;
  /** Sends the signal and resolves with the exit code (null when killed by a signal). */
  stop(signal: NodeJS.Signals): Promise<number | null>;
}

/** Starts `src/server.ts` with the test configuration (and `env` on top) and waits until it serves. */
export async function startServiceProcess(config: Config, env: Record<string, string> = {}): Promise<ServiceProcess> {
  // node itself with tsx's loader: one process, so a signal reaches the service and not a wrapper.
  const child = spawn(process.execPath, ["--import", "tsx/esm", "src/server.ts"], {
    env: {
      ...process.env,
      DATABASE_URL: config.databaseUrl,
      REDIS_URL: config.redisUrl,
      REDIS_CLUSTER_NODES: config.redisClusterNodes.join(","),
      AMQP_URL: config.amqpUrl,
      RABBITMQ_PREFIX: config.rabbitmq.prefix,
      JWT_SECRET: config.jwtSecret,
      PORT: "0",
      METRICS_PORT: "0",
      LOG_LEVEL: "info",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      // A service that did not start in time must not outlive the test.
      child.kill("SIGTERM");
      reject(new Error(`service did not start:\n${output}`));
    }, 30_000);
    child.once("exit", (code) => reject(new Error(`service exited with ${code}:\n${output}`)));
    child.stdout?.on("data", () => {
      const match = /"url":"(http:[^"]+)graphql"/.exec(output);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
  });
  return {
    url,
    child,
    output: () => output,
    async stop(signal) {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      const [code] = (await once(child, "exit")) as [number | null];
      return code;
    },
  };
}
