// Runs fault cases, each on fresh private instances: its own Redis (behind a
// TCP proxy), its own database in the suite's PostgreSQL cluster, its own queue
// names in the suite's RabbitMQ vhost (behind a proxy), and the service started
// from src/ as users start it. Returns what each case found; the caller prints.
import { mkdirSync, writeFileSync, statSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Cluster, Redis } from "ioredis";
import pg from "pg";
import { startTcpProxy, type TcpProxy } from "../lib/tcp-proxy.js";
import { freePort } from "../lib/ports.js";
import { cases as allCases, type ChaosCase, type FaultContext } from "./cases.js";
import { settle, verify, verifyViews, type RedisClient, type Settling, type Verdict, type ViewsAllowance, type ViewsVerdict } from "./check.js";
import type { Figure } from "./figures.js";
import { createCast, defaultLoad, Endpoint, startLoad, type LoadOptions, type LoadRun } from "./load.js";
import { startPostgresInstance, type PostgresInstance } from "./postgres-instance.js";
import { createRabbitVhost } from "./rabbitmq-vhost.js";
import { startRedisCluster, type RedisClusterInstance } from "./redis-cluster.js";
import { startRedisInstance, type RedisInstance } from "./redis-instance.js";
import { buildEntries, startEntry, waitForLogLine, waitUntilServing, type Entry, type ServiceProcess } from "./service-process.js";

export const caseNames = allCases.map((c) => c.name);

export interface CaseResult {
  readonly name: string;
  readonly summary: string;
  readonly skipped: string | null;
  /** Set when the case could not run to its check (a process would not start…). */
  readonly error: string | null;
  readonly expectsLoss: string | null;
  readonly attempted: number;
  readonly acknowledged: number;
  readonly verdict: Verdict | null;
  /** The hot post's views against the viewers' reports. */
  readonly views: ViewsVerdict | null;
  readonly settling: Settling | null;
  readonly failures: ReadonlyMap<string, number>;
  readonly maxLatencyMs: number;
  /** What the case measured beyond the check, some held to targets. */
  readonly figures: readonly Figure[];
  readonly timeline: readonly string[];
  readonly directory: string;
  readonly seconds: number;
}

/** The case's figures whose target it missed. */
export const missedTargets = (result: CaseResult): Figure[] => result.figures.filter((f) => f.target && !f.target.met);

/** Whether the case broke a guarantee (its expected loss aside) or missed a target. */
export function failed(result: CaseResult): boolean {
  if (result.skipped) return false;
  if (result.error || !result.verdict || !result.settling?.settled) return true;
  if (missedTargets(result).length > 0) return true;
  const v = result.verdict;
  const unexpectedLost = v.lost.length - (result.expectsLoss ? v.expectedLost : 0);
  const unexpectedMisanswered = v.misanswered.length - (result.expectsLoss ? v.expectedMisanswered : 0);
  const views = result.views;
  const viewsWrong = !views || views.lost > views.allowedLost || views.doubled > 0 || views.drift !== null;
  return unexpectedLost > 0 || v.doubledCount > 0 || v.drift.length > 0 || unexpectedMisanswered > 0 || result.settling.deadLettered > 0 || viewsWrong;
}

export interface SuiteOptions {
  readonly cases?: readonly string[];
  /** Where logs and findings go, one folder per case. */
  readonly directory: string;
  /** The broker the suite makes its vhost on (never restarted). */
  readonly amqpUrl: string;
  /** The PostgreSQL server to fall back on when no private cluster can be made (never restarted). */
  readonly sharedDatabaseUrl: string;
  readonly load?: Partial<LoadOptions>;
  /** Scales every case's load duration (the vitest run uses shorter loads). */
  readonly loadScale?: number;
  readonly settleTimeoutMs?: number;
  /** Settings for the service on top of the suite's and the case's. */
  readonly serviceEnv?: Readonly<Record<string, string>>;
  readonly progress?: (line: string) => void;
}

const partitions = 1024;
const jwtSecret = "chaos-secret-not-for-production-use";

interface Instances {
  readonly postgres: PostgresInstance;
  readonly vhost: Awaited<ReturnType<typeof createRabbitVhost>>;
  readonly runTag: string;
}

export async function runChaos(options: SuiteOptions): Promise<CaseResult[]> {
  const chosen = options.cases?.length ? allCases.filter((c) => options.cases?.includes(c.name)) : allCases;
  const unknown = (options.cases ?? []).filter((n) => !caseNames.includes(n));
  if (unknown.length) throw new Error(`Unknown case ${unknown.join(", ")}; the cases are ${caseNames.join(", ")}.`);
  const progress = options.progress ?? (() => {});
  const runTag = `chaos_${process.pid}_${Date.now().toString(36)}`;
  mkdirSync(options.directory, { recursive: true });
  progress("building the service");
  buildEntries();
  progress("starting a private PostgreSQL cluster and a RabbitMQ vhost");
  const postgres = await startPostgresInstance(options.sharedDatabaseUrl, runTag);
  const vhost = await createRabbitVhost(options.amqpUrl, runTag);
  const results: CaseResult[] = [];
  try {
    for (const [i, c] of chosen.entries()) {
      const label = `case ${i + 1}/${chosen.length} ${c.name}`;
      results.push(await runCase(c, { postgres, vhost, runTag }, options, (line) => progress(`${label}: ${line}`)));
    }
  } finally {
    await vhost.remove();
    await postgres.stop();
  }
  return results;
}

interface CaseRedis {
  readonly redis: RedisInstance;
  readonly cluster: RedisClusterInstance | null;
  readonly redisProxy: TcpProxy;
  readonly redisClient: RedisClient;
  readonly retarget: (port: number) => void;
  readonly redisEnv: Readonly<Record<string, string>>;
}

/**
 * The case's Redis (a single server, with what `beforeStart` puts around it, or a cluster), the
 * service's settings for it, and the check's own client.
 */
async function startCaseRedis(c: ChaosCase, cleanup: (() => Promise<unknown>)[]): Promise<CaseRedis> {
  if (c.redisCluster) {
    const cluster = await startRedisCluster({ appendOnly: c.redisAppendOnly });
    cleanup.push(() => cluster.stop());
    const redis = cluster.nodes[0] as RedisInstance;
    // Unused by the service, which reaches the nodes as they announce themselves; kept so every case has one.
    const redisProxy = await startTcpProxy({ host: "127.0.0.1", port: redis.port });
    cleanup.push(() => redisProxy.close());
    const redisClient = new Cluster(
      cluster.nodes.map((node) => ({ host: "127.0.0.1", port: node.port })),
      { lazyConnect: true, redisOptions: { maxRetriesPerRequest: null } },
    );
    redisClient.on("error", () => {});
    await redisClient.connect();
    cleanup.push(async () => redisClient.disconnect());
    const retarget = () => {
      throw new Error("a Redis Cluster fails over by itself: no address moves");
    };
    const redisEnv: Record<string, string> = { REDIS_CLUSTER_NODES: cluster.seeds };
    return { redis, cluster, redisProxy, redisClient, retarget, redisEnv };
  }
  const redis = await startRedisInstance({ appendOnly: c.redisAppendOnly, maxMemory: c.redisMaxMemory });
  cleanup.push(() => redis.stop());
  const around = c.beforeStart ? await c.beforeStart(redis) : null;
  if (around) cleanup.push(() => around.stop());
  const redisProxy = await startTcpProxy({ host: "127.0.0.1", port: redis.port });
  cleanup.push(() => redisProxy.close());
  // The checks' own way to Redis: never faulted, and moved with the service's by a failover.
  const inspectProxy = await startTcpProxy({ host: "127.0.0.1", port: redis.port });
  cleanup.push(() => inspectProxy.close());
  const redisClient = new Redis(inspectProxy.url, { lazyConnect: true, maxRetriesPerRequest: null });
  redisClient.on("error", () => {});
  await redisClient.connect();
  cleanup.push(async () => redisClient.disconnect());
  const retarget = (port: number) => {
    redisProxy.retarget(port);
    inspectProxy.retarget(port);
  };
  const redisEnv: Record<string, string> = { REDIS_URL: redisProxy.url, ...around?.env };
  return { redis, cluster: null, redisProxy, redisClient, retarget, redisEnv };
}

async function runCase(c: ChaosCase, instances: Instances, options: SuiteOptions, progress: (line: string) => void): Promise<CaseResult> {
  const started = Date.now();
  const directory = path.join(options.directory, c.name);
  mkdirSync(directory, { recursive: true });
  const figures: Figure[] = [];
  const empty = {
    expectsLoss: c.expectsLoss ?? null,
    attempted: 0,
    acknowledged: 0,
    verdict: null,
    views: null,
    settling: null,
    failures: new Map<string, number>(),
    maxLatencyMs: 0,
    figures,
    directory,
  };
  const skipped = c.unavailable?.(instances.postgres) ?? null;
  if (skipped) return { name: c.name, summary: c.summary, skipped, error: null, timeline: [], seconds: 0, ...empty };

  const timeline: string[] = [];
  const cleanup: (() => Promise<unknown>)[] = [];
  let elapsedMs = () => 0;
  const note = (event: string) => {
    timeline.push(`${(elapsedMs() / 1000).toFixed(2)} s  ${event}`);
    progress(event);
  };
  let load: ReturnType<typeof startLoad> | undefined;
  try {
    progress(`starting Redis${c.redisCluster ? " Cluster" : ""}, proxies and the database`);
    const { redis, cluster, redisProxy, redisClient, retarget, redisEnv }: CaseRedis = await startCaseRedis(c, cleanup);
    const broker = new URL(options.amqpUrl);
    const amqpProxy: TcpProxy = await startTcpProxy({ host: broker.hostname, port: Number(broker.port || 5672) }, "amqp");
    cleanup.push(() => amqpProxy.close());
    const databaseUrl = await instances.postgres.createDatabase(`${instances.runTag}_${c.name.replaceAll("-", "_")}`);

    const apiPort = await freePort();
    const prefix = `chaos-${c.name}`;
    const env: Record<string, string> = {
      DATABASE_URL: databaseUrl,
      ...redisEnv,
      AMQP_URL: instances.vhost.urlVia("127.0.0.1", amqpProxy.port),
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
      ...c.env,
      ...options.serviceEnv,
    };
    const logFile = (entry: Entry) => path.join(directory, `${entry}.log`);
    const apiUrl = `http://127.0.0.1:${apiPort}/graphql`;
    const processes = new Map<string, ServiceProcess>();
    const start = async (entry: "start" | "api" | "worker", name: string = entry, extraEnv: Readonly<Record<string, string>> = {}, url = apiUrl) => {
      const file = path.join(directory, `${name}.log`);
      writeFileSync(file, "", { flag: "a" });
      const from = statSync(file).size;
      const proc = startEntry(entry, { ...env, ...extraEnv }, file);
      processes.set(name, proc);
      if (entry === "worker") await waitForLogLine(file, "pipeline running", from, proc);
      else await waitUntilServing(url, proc, file);
      return proc;
    };
    cleanup.push(() => Promise.all([...processes.values()].map((p) => p.stop())));
    progress(`starting the service (${c.layout})`);
    if (c.layout === "npm start") await start("start");
    else await Promise.all([start("api"), start("worker")]);

    const api = new Endpoint(apiUrl);
    progress("registering users and writing posts");
    const loadOptions = { ...defaultLoad, ...c.load, ...options.load };
    const tag = `c${Date.now().toString(36)}`;
    const cast = await createCast(api, tag, loadOptions);
    const casePosts = new Set<string>();

    const ctx: FaultContext = {
      redis,
      cluster,
      redisClient,
      failOverTo: retarget,
      partitions,
      redisProxy,
      amqpProxy,
      postgres: instances.postgres,
      databaseUrl,
      hotPostId: (cast.posts[0] as { id: string }).id,
      api,
      httpBase: `http://127.0.0.1:${apiPort}`,
      cast,
      tag,
      jwtSecret,
      get load(): LoadRun {
        if (!load) throw new Error("the load has not started yet");
        return load;
      },
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
      settle: (timeoutMs) => settle(redisClient, partitions, instances.vhost, prefix, timeoutMs),
      ownPosts(ids) {
        for (const id of ids) casePosts.add(id);
      },
      figure(figure) {
        figures.push(figure);
        progress(`${figure.name}: ${figure.value}`);
      },
      defer(close) {
        cleanup.push(close);
      },
      async reconcile() {
        const proc = startEntry("reconcile", env, logFile("reconcile"));
        processes.set(`reconcile-${Date.now()}`, proc);
        return proc.exited;
      },
      elapsedMs: () => elapsedMs(),
      note,
    };

    if (c.prepare) {
      progress("preparing the case");
      await c.prepare(ctx);
    }
    const loadMs = c.loadSeconds * 1000 * (options.loadScale ?? 1);
    load = startLoad(api, cast, loadOptions);
    elapsedMs = load.elapsedMs;
    const running = load;
    const ticker = setInterval(() => {
      const acked = [...running.pairs.values()].reduce((n, p) => n + p.operations.filter((o) => o.outcome.kind === "acknowledged").length, 0);
      progress(`load ${(running.elapsedMs() / 1000).toFixed(0)}/${(loadMs / 1000).toFixed(0)} s, ${running.attempted()} requests, ${acked} acknowledged`);
    }, 1_000);
    try {
      await Promise.all([c.inject(ctx), sleep(loadMs)]);
    } finally {
      clearInterval(ticker);
      await load.stop();
    }
    note("load stopped");

    progress("settling: waiting for the outbox and the queues to empty");
    const settling = await settle(redisClient, partitions, instances.vhost, prefix, options.settleTimeoutMs ?? 60_000);
    note(settling.settled ? `settled in ${settling.seconds.toFixed(1)} s` : `not settled after ${settling.seconds.toFixed(1)} s: ${settling.left}`);
    progress("checking Redis and PostgreSQL against the history");
    // Opened only now: a connection opened before a PostgreSQL restart would be broken by it.
    const sql = new pg.Client({ connectionString: databaseUrl });
    sql.on("error", () => {});
    await sql.connect();
    cleanup.push(() => sql.end().catch(() => undefined));
    if (c.afterSettled) {
      progress("measuring the settled stores");
      await c.afterSettled(ctx, sql);
    }
    const input = {
      redis: redisClient,
      partitions,
      sql,
      api,
      cast,
      pairs: load.pairs,
      casePosts,
      ...(c.expectsLoss ? { expectedLoss: lossWindow(timeline) } : {}),
    };
    const allowance = viewsAllowance(c, timeline);
    const checkViews = () => verifyViews(redisClient, partitions, sql, ctx.hotPostId, (load as NonNullable<typeof load>).views, allowance);
    let verdict = await verify(input);
    let views = await checkViews();
    // A difference may be a change still on its way (a command that ran late); only one that stays counts.
    for (let again = 0; again < 2 && (isDirty(verdict) || views.drift !== null || views.lost > views.allowedLost) && settling.settled; again++) {
      await sleep(2_000);
      const resettled = await settle(redisClient, partitions, instances.vhost, prefix, 10_000);
      note(`checked again after ${resettled.settled ? "settling" : "waiting"} another ${resettled.seconds.toFixed(1)} s`);
      verdict = await verify(input);
      views = await checkViews();
    }
    const result: CaseResult = {
      name: c.name,
      summary: c.summary,
      skipped: null,
      error: null,
      expectsLoss: c.expectsLoss ?? null,
      attempted: load.attempted(),
      acknowledged: [...load.pairs.values()].reduce((n, p) => n + p.operations.filter((o) => o.outcome.kind === "acknowledged").length, 0),
      verdict,
      views,
      settling,
      failures: load.failures,
      maxLatencyMs: load.maxLatencyMs(),
      figures,
      timeline,
      directory,
      seconds: (Date.now() - started) / 1000,
    };
    writeFindings(result);
    return result;
  } catch (error) {
    const result: CaseResult = {
      name: c.name,
      summary: c.summary,
      skipped: null,
      error: (error as Error).message,
      timeline,
      seconds: (Date.now() - started) / 1000,
      ...empty,
      ...(load ? { attempted: load.attempted(), failures: load.failures, maxLatencyMs: load.maxLatencyMs() } : {}),
    };
    writeFindings(result);
    return result;
  } finally {
    await load?.stop();
    progress("stopping the service and the case's instances");
    for (const close of cleanup.reverse()) await close().catch(() => undefined);
  }
}

const isDirty = (v: Verdict) => v.lost.length > 0 || v.doubledCount > 0 || v.drift.length > 0;

/**
 * Which views the case may lose. An API process held the views answered since its
 * last flush, which came at most a flush interval (1 s) before the kill; another
 * half second covers a flush under way when it was killed. A process that cannot
 * reach Redis holds what it answered since its last flush before it lost Redis.
 */
function viewsAllowance(c: ChaosCase, timeline: readonly string[]): ViewsAllowance {
  if (c.viewsMayBeLost === "any") return { kind: "any" };
  const steps = c.viewsMayBeLost;
  if (typeof steps === "object") {
    const at = (what: string) => Number.parseFloat(timeline.find((l) => l.includes(what)) ?? "NaN") * 1000;
    const from = at(steps.from);
    const to = at(steps.to);
    return Number.isNaN(from) || Number.isNaN(to) ? { kind: "none" } : { kind: "flushWindow", killMs: to, windowMs: to - from + 1_500 };
  }
  if (c.viewsMayBeLost !== "flushWindow") return { kind: "none" };
  const line = timeline.find((l) => l.includes("API kill -9"));
  return line ? { kind: "flushWindow", killMs: Number.parseFloat(line) * 1000, windowMs: 1_500 } : { kind: "none" };
}

/** From the crash of the case's Redis to its being back, as the timeline noted them (ms into the load). */
function lossWindow(timeline: readonly string[]): { crashMs: number; backMs: number } {
  const at = (what: string) => {
    const line = timeline.find((l) => l.includes(what));
    return line ? Number.parseFloat(line) * 1000 : Number.POSITIVE_INFINITY;
  };
  return { crashMs: at("Redis kill -9"), backMs: at("Redis started again") };
}

function writeFindings(result: CaseResult): void {
  const v = result.verdict;
  const lines = [
    `${result.name}: ${result.summary}`,
    result.error ? `ERROR: ${result.error}` : "",
    ...result.figures.map((f) => `${f.name}: ${f.value}${f.target ? ` (target ${f.target.text}: ${f.target.met ? "met" : "MISSED"})` : ""}`),
    `attempted ${result.attempted}, acknowledged ${result.acknowledged}, longest request ${result.maxLatencyMs} ms`,
    `request failures: ${[...result.failures].map(([k, n]) => `${k}×${n}`).join(", ") || "none"}`,
    result.settling
      ? `settled: ${result.settling.settled} after ${result.settling.seconds.toFixed(1)} s ${result.settling.left}; dead-lettered ${result.settling.deadLettered}`
      : "",
    result.views
      ? `views of the hot post: ${result.views.acknowledged} acknowledged, ${result.views.unanswered} unanswered, ${result.views.counted} counted; lost ${result.views.lost} (${result.views.allowedLost} allowed), doubled ${result.views.doubled}${result.views.drift ? `; ${result.views.drift}` : ""}`
      : "",
    "",
    "timeline (s into the load):",
    ...result.timeline.map((t) => `  ${t}`),
    ...(v
      ? [
          "",
          `lost (${v.lost.length}${result.expectsLoss ? `, ${v.expectedLost} acknowledged before the crash` : ""}):`,
          ...v.lost.map((l) => `  ${l}`),
          `doubled (${v.doubledCount}):`,
          ...v.doubled.map((l) => `  ${l}`),
          `drift (${v.drift.length}):`,
          ...v.drift.map((l) => `  ${l}`),
          `misanswered (${v.misanswered.length}):`,
          ...v.misanswered.map((l) => `  ${l}`),
          `unknown pairs: ${v.unknown}`,
        ]
      : []),
  ];
  writeFileSync(path.join(result.directory, "findings.txt"), lines.filter((l, i) => l !== "" || i > 0).join("\n") + "\n");
}
