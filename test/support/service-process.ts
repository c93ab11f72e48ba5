// The service as separate processes (npm start's and npm run worker's entry points), for tests that kill or signal them.
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

/**
 * The compiled entry point `name` (dist/main/<name>.js), as npm start runs it, built by the
 * suite's global setup from the sources under test: a process starts in a fraction of the
 * time tsx would take compiling its sources first.
 */
export const entryPoint = (name: "start" | "api" | "worker") => `dist/main/${name}.js`;

/** Starts npm start's entry point with the test configuration (and `env` on top) and waits until it serves. */
export function startServiceProcess(config: Config, env: Record<string, string> = {}): Promise<ServiceProcess> {
  return startProcess(entryPoint("start"), config, env, (output) => /"url":"(http:[^"]+)graphql"/.exec(output)?.[1]);
}

/** Starts one API process alone (no supervisor, as Kubernetes runs it) and waits until it serves. */
export function startApiProcess(config: Config, env: Record<string, string> = {}): Promise<ServiceProcess> {
  return startProcess(entryPoint("api"), config, env, (output) => /"url":"(http:[^"]+)graphql"/.exec(output)?.[1]);
}

/** Starts the worker (`npm run worker`: the persistence pipeline alone) and waits until its pipeline runs. */
export function startWorkerProcess(config: Config, env: Record<string, string> = {}): Promise<ServiceProcess> {
  return startProcess(entryPoint("worker"), config, env, (output) => (output.includes('"msg":"pipeline running"') ? "" : undefined));
}

/** Spawns `entry` and resolves once `ready` finds what it looks for in the output (its url, if any). */
async function startProcess(
  entry: string,
  config: Config,
  env: Record<string, string>,
  ready: (output: string) => string | undefined,
): Promise<ServiceProcess> {
  // node itself: one process, so a signal reaches the service and not a wrapper.
  const child = spawn(process.execPath, [entry], {
    env: {
      ...process.env,
      DATABASE_URL: config.databaseUrl,
      REDIS_URL: config.redisUrl,
      REDIS_CLUSTER_NODES: config.redisClusterNodes.join(","),
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
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      // A service that did not start in time must not outlive the test.
      child.kill("SIGTERM");
      reject(new Error(`${entry} did not start:\n${output}`));
    }, 30_000);
    child.once("exit", (code) => reject(new Error(`${entry} exited with ${code}:\n${output}`)));
    child.stdout?.on("data", () => {
      const found = ready(output);
      if (found !== undefined) {
        clearTimeout(timer);
        resolve(found);
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
