// The process layout of `npm start`: API processes on every core sharing one
// port (node:cluster), and the persistence pipeline once beside them, as the
// same process `npm run worker` runs. The supervisor serves no GraphQL; it
// starts the others, restarts one that dies, serves their metrics summed on one
// port (src/process/metrics-endpoint.ts says why), and on SIGTERM or SIGINT stops them
// all and exits 0 only when every one of them stopped cleanly.
//
// A process that dies is started again, alone: the others go on serving. One that
// keeps dying soon after its start is started again later and later (capped), never
// given up on, since what kills it (a store down) may pass. One that refuses to start
// (exit 78: its configuration must change) is not started again: the supervisor
// stops the others and exits 78 itself.
import cluster, { type Worker } from "node:cluster";
import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Server } from "node:http";
import type { Logger } from "pino";
import { refusalExitCode } from "./refusal.js";
import { aggregatedMetrics, serveMetrics, type MetricsChild } from "./metrics-endpoint.js";
import { backoffMs } from "../domain/backoff.js";

export interface SupervisorOptions {
  readonly logger: Logger;
  /** API processes to run. */
  readonly apiProcesses: number;
  /** Whether to run the persistence pipeline beside them. */
  readonly pipeline: boolean;
  /** Entry file of one API process. */
  readonly apiEntry: URL;
  /** Entry file of the pipeline process. */
  readonly pipelineEntry: URL;
  /** NODE_OPTIONS as set: a young generation size given there is kept. */
  readonly nodeOptions: string;
  /**
   * How long stopping may take before what is left is killed, in milliseconds; past
   * the processes' own bound (shutdown.ts), so each ends itself first.
   */
  readonly stopTimeoutMs?: number;
  /** The first wait before starting again a process that died soon after its start, in milliseconds; it doubles up to `maxRestartDelayMs`. */
  readonly firstRestartDelayMs?: number;
  /** The longest wait before starting a process again, in milliseconds. */
  readonly maxRestartDelayMs?: number;
  /** Where the metrics of every process are served, summed, at /metrics; port 0 serves none. */
  readonly metrics?: { readonly host: string; readonly port: number };
}

/**
 * V8's young generation for the API processes. A feed request allocates
 * a few hundred kilobytes that die with it; with the default young generation many
 * survive long enough to be promoted and collected as old objects. Measured on a
 * feed of 100 posts in one API process: 1.9 ms of CPU per request by default,
 * 0.9–1.0 ms with 16 or 32 MB semi-spaces, worse again at 64 MB and above.
 */
const youngGeneration = "--max-semi-space-size=32";

/** Node flags for an API process: the supervisor's, and the young generation size unless one was given. */
function apiFlags(nodeOptions: string): string[] {
  const given = [...process.execArgv, ...nodeOptions.split(/\s+/)].some((flag) => flag.startsWith("--max-semi-space-size"));
  return given ? process.execArgv : [...process.execArgv, youngGeneration];
}

/** A process that lived this long before dying is started again at once, its backoff forgotten. */
const stableAfterMs = 30_000;

interface Supervised {
  readonly role: "api" | "pipeline";
  /** Starts the child; `exited` runs once when it is gone. */
  start(exited: (code: number | null, signal: string | null) => void): Child;
}

interface Child {
  readonly pid: number | undefined;
  readonly kill: (signal: NodeJS.Signals) => void;
  /** Its IPC channel, over which it answers for its metrics. */
  readonly channel: MetricsChild;
}

/** Calls `exited` once, whether the child exits or could not be started at all. */
function watch(child: ChildProcess, role: string, logger: Logger, exited: (code: number | null, signal: string | null) => void): void {
  let done = false;
  const end = (code: number | null, signal: string | null) => {
    if (!done) exited(code, signal);
    done = true;
  };
  child.once("exit", end);
  // `on`, not `once`: a later failed signal or send must be logged, not thrown as an unhandled 'error'.
  child.on("error", (err) => {
    logger.error({ err, role }, "a process could not be started or signalled");
    if (child.pid === undefined || child.exitCode !== null) end(null, null);
  });
}

/** The API processes: node:cluster's workers, all listening on one port, the first to listen announcing where. */
function apiRole(options: SupervisorOptions): Supervised {
  const { logger } = options;
  let announced = false;
  cluster.setupPrimary({ exec: fileURLToPath(options.apiEntry), execArgv: apiFlags(options.nodeOptions) });
  cluster.on("listening", (_worker: Worker, address) => {
    if (announced) return;
    announced = true;
    const host = address.address?.includes(":") ? `[${address.address}]` : (address.address ?? "127.0.0.1");
    logger.info({ url: `http://${host}:${address.port}/graphql`, apiProcesses: options.apiProcesses, pipeline: options.pipeline }, "serving GraphQL");
  });
  return {
    role: "api",
    start(exited) {
      const worker = cluster.fork();
      watch(worker.process, "api", logger, exited);
      // cluster re-emits the process's 'error' on the worker, where an unheard one would end the supervisor; watch() logs it.
      worker.on("error", () => {});
      return { pid: worker.process.pid, kill: (signal) => worker.process.kill(signal), channel: worker };
    },
  };
}

/** The pipeline: the same process as `npm run worker`, with an IPC channel so it stops when the supervisor is gone. */
function pipelineRole(options: SupervisorOptions): Supervised {
  return {
    role: "pipeline",
    start(exited) {
      const child: ChildProcess = fork(fileURLToPath(options.pipelineEntry), { stdio: "inherit" });
      watch(child, "pipeline", options.logger, exited);
      return { pid: child.pid, kill: (signal) => child.kill(signal), channel: child };
    },
  };
}

// The children running, whether stopping has begun and the exit code are one state, which
// every child's exit, the metrics endpoint and the signals read and change.
export function startSupervisor(options: SupervisorOptions): void {
  const { logger } = options;
  const stopTimeoutMs = options.stopTimeoutMs ?? 9_500;
  const firstRestartDelayMs = options.firstRestartDelayMs ?? 500;
  const maxRestartDelayMs = options.maxRestartDelayMs ?? 5_000;
  let stopping = false;
  let exitCode = 0;
  const running = new Map<number, Child & { readonly role: string }>();
  const api = apiRole(options);
  const pipeline = pipelineRole(options);

  /** Starts a process of the role; when it dies, starts another after its backoff. `quickDeaths`: deaths in a row soon after start. */
  function supervise(what: Supervised, quickDeaths = 0): void {
    const startedAt = Date.now();
    const child: Child = what.start((code, signal) => {
      const pid = child.pid;
      if (pid !== undefined) running.delete(pid);
      if (stopping) {
        // Our own SIGTERM ends a process that had not yet installed its handler (still starting): nothing was left undone.
        if (code !== 0 && !(code === null && signal === "SIGTERM") && exitCode === 0) exitCode = 1;
        logger.info({ role: what.role, childPid: pid, code, signal }, "process stopped");
        if (running.size === 0) finish();
        return;
      }
      if (code === refusalExitCode) {
        logger.fatal(
          { role: what.role, childPid: pid, code },
          `a ${what.role} process refused to start (its log line above says what to change); not starting it again, stopping`,
        );
        exitCode = refusalExitCode;
        stop("a process refused to start");
        return;
      }
      const deaths = Date.now() - startedAt < stableAfterMs ? quickDeaths + 1 : 0;
      const delayMs = deaths === 0 ? 0 : backoffMs(deaths - 1, { firstMs: firstRestartDelayMs, maxMs: maxRestartDelayMs });
      logger.error({ role: what.role, childPid: pid, code, signal, restartInMs: delayMs }, "process died; starting another");
      // Not unref'd: when the last child is gone, this timer is what keeps the supervisor alive to start another.
      setTimeout(() => !stopping && supervise(what, deaths), delayMs);
    });
    if (child.pid !== undefined) running.set(child.pid, { ...child, role: what.role });
  }

  let metricsServer: Server | null = null;
  if (options.metrics && options.metrics.port !== 0) {
    const source = aggregatedMetrics(() => [...running.values()].map((child) => child.channel));
    void serveMetrics(source, options.metrics.host, options.metrics.port, logger).then((server) => {
      metricsServer = server;
      if (stopping) server?.close();
    });
  }

  function finish(): void {
    logger.info(exitCode === 0 ? "stopped" : exitCode === refusalExitCode ? "stopped: a process refused to start" : "stopped, not cleanly");
    process.exit(exitCode);
  }

  function stop(reason: string): void {
    if (stopping) return;
    stopping = true;
    logger.info({ reason }, "shutting down");
    metricsServer?.close();
    if (running.size === 0) return finish();
    for (const child of running.values()) child.kill("SIGTERM");
    setTimeout(() => {
      logger.error({ left: [...running.values()].map((c) => c.role) }, `processes still running after ${stopTimeoutMs} ms; killing them`);
      if (exitCode === 0) exitCode = 1;
      for (const child of running.values()) child.kill("SIGKILL");
    }, stopTimeoutMs).unref();
  }

  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  for (let i = 0; i < options.apiProcesses; i++) supervise(api);
  if (options.pipeline) supervise(pipeline);
}
