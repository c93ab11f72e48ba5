// The service of one case, started from src/ as users start it (npm start's
// supervisor, or API and worker apart) against the case's stores, each process
// logging into the case's folder; and what a case may do to it while it runs.
import { statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { freePort } from "../lib/ports.js";
import type { CaseStores } from "./case-stores.js";
import { Endpoint } from "./endpoint.js";
import { jwtSecret, partitions, type RunningCase } from "./running-case.js";
import { startEntry, waitForLogLine, waitUntilServing, type ServiceProcess } from "./service-process.js";
import { settle, type Settling } from "./settle.js";

type Role = "start" | "api" | "worker";

export interface CaseService {
  /** The API the load uses (npm start's port, or api.ts's). */
  readonly api: Endpoint;
  readonly apiPort: number;
  /** The running processes by role; `restart` starts one again as it was started and waits until it works. */
  process(role: Role): ServiceProcess;
  restart(role: Role): Promise<void>;
  /** One more API process on a port of its own, with `env` on top of the case's settings. */
  startApi(name: string, env: Readonly<Record<string, string>>): Promise<{ readonly api: Endpoint; readonly process: ServiceProcess }>;
  /** Runs `npm run reconcile`'s entry against the case's stores; resolves with its exit code. */
  reconcile(): Promise<number | null>;
  /** Waits until the outbox and the case's queues are empty (seen twice in a row). */
  settle(timeoutMs: number): Promise<Settling>;
}

function serviceEnv(run: RunningCase, stores: CaseStores, apiPort: number, prefix: string): Record<string, string> {
  return {
    DATABASE_URL: stores.databaseUrl,
    ...stores.redisEnv,
    AMQP_URL: run.instances.vhost.urlVia("127.0.0.1", stores.amqpProxy.port),
    RABBITMQ_PREFIX: prefix,
    JWT_SECRET: jwtSecret,
    HOST: "127.0.0.1",
    PORT: String(apiPort),
    METRICS_PORT: "0",
    // Nothing may repair a difference behind the check's back, unless the case runs it.
    RECONCILE_CRON: "off",
    // Every request of the load comes from 127.0.0.1: one address's budget would refuse the load, not test the fault.
    RATE_LIMIT_IP_MUTATIONS: "0",
    NODE_ENV: "production",
    LOG_LEVEL: "info",
    WEB_CONCURRENCY: "2",
    REDIS_PARTITIONS: String(partitions),
    ...run.c.env,
    ...run.settings.serviceEnv,
  };
}

/** Starts the case's service in its layout and waits until it serves; the case's cleanup stops every process it starts. */
export async function startService(run: RunningCase, stores: CaseStores): Promise<CaseService> {
  const { c, directory } = run;
  const apiPort = await freePort();
  const prefix = `chaos-${c.name}`;
  const env = serviceEnv(run, stores, apiPort, prefix);
  const apiUrl = `http://127.0.0.1:${apiPort}/graphql`;
  const processes = new Map<string, ServiceProcess>();
  const start = async (entry: Role, name: string = entry, extraEnv: Readonly<Record<string, string>> = {}, url = apiUrl) => {
    const file = path.join(directory, `${name}.log`);
    writeFileSync(file, "", { flag: "a" });
    const from = statSync(file).size;
    const proc = startEntry(entry, { ...env, ...extraEnv }, file);
    processes.set(name, proc);
    if (entry === "worker") await waitForLogLine(file, "pipeline running", from, proc);
    else await waitUntilServing(url, proc, file);
    return proc;
  };
  run.cleanup.push(() => Promise.all([...processes.values()].map((p) => p.stop())));
  run.progress(`starting the service (${c.layout})`);
  if (c.layout === "npm start") await start("start");
  else await Promise.all([start("api"), start("worker")]);

  return {
    api: new Endpoint(apiUrl),
    apiPort,
    process(role) {
      const p = processes.get(role);
      if (!p) throw new Error(`the case has no ${role} process (layout ${c.layout})`);
      return p;
    },
    restart: async (role) => {
      await start(role);
    },
    async startApi(name, extraEnv) {
      const port = await freePort();
      const url = `http://127.0.0.1:${port}/graphql`;
      const proc = await start("api", name, { ...extraEnv, PORT: String(port) }, url);
      return { api: new Endpoint(url), process: proc };
    },
    async reconcile() {
      const proc = startEntry("reconcile", env, path.join(directory, "reconcile.log"));
      processes.set(`reconcile-${Date.now()}`, proc);
      return proc.exited;
    },
    settle: (timeoutMs) => settle(stores.redisClient, partitions, run.instances.vhost, prefix, timeoutMs),
  };
}
