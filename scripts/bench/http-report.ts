// The tables and lines the HTTP scenarios, live-hot and scale print.
import { availableParallelism } from "node:os";
import type { ServiceMode } from "./harness.js";
import { connections, type HttpFigures } from "./http-load.js";
import type { LiveFigures } from "./live.js";
import { scaleRatios, type ScaleRun } from "./scale.js";
import type { HttpResults } from "./scenarios.js";

/** What Redis alone did in the same run (redis-benchmark), per second. */
export interface RedisAlone {
  /** Like scripts. */
  readonly likes: number;
  /** Pipelines of 100 HGETALL. */
  readonly feeds: number;
}

export function printLive(live: readonly LiveFigures[]): void {
  console.log(
    `\nLive counts (graphql-ws): subscribers of the hot post while it takes likes at a fixed rate; lag from a like's answer to each subscriber's first message holding it:`,
  );
  console.table(
    live.map((l) => ({
      mode: l.mode,
      subscribers: l.subscribers,
      "likes/s": l.likesPerSecond,
      likes: l.likes,
      failures: l.failures,
      "like p50/p99 ms": `${l.likeP50Ms} / ${l.likeP99Ms}`,
      "lag p50 ms": l.lagP50Ms,
      "lag p99 ms": l.lagP99Ms,
      "lag max ms": l.lagMaxMs,
      "msgs/subscriber/s": l.messagesPerSubscriberSecond,
      "min gap ms": l.minGapMs,
      "likes never shown": l.missedBySubscribers,
      "API CPU (cores)": l.apiCores,
      "load CPU (cores)": l.loadCores,
    })),
  );
}

/** Every HTTP run's figures, then how the runs compare with Redis alone. */
export function printHttp(results: HttpResults, shapeName: string, raw: RedisAlone): void {
  printHttpTables(results.http, shapeName);
  printAgainstRedisAlone(results, raw);
}

function printHttpTables(results: readonly HttpFigures[], shapeName: string): void {
  console.log(
    `\nThe service over HTTP on the ${shapeName} data set, ${connections} connections, this machine (load generator, service, Redis, RabbitMQ and PostgreSQL share its cores):`,
  );
  console.table(
    results.map((r) => ({
      scenario: r.scenario,
      mode: r.mode,
      "req/s": r.requestsPerSecond,
      "p50 ms": r.p50Ms,
      "p99 ms": r.p99Ms,
      "max ms": r.maxMs,
      failures: r.failures,
      exact: r.exact,
    })),
  );
  console.log("\nWhat each request cost (CPU per request of each process or server; Redis commands include those run inside scripts):");
  console.table(
    results.map((r) => ({
      scenario: r.scenario,
      mode: r.mode,
      "API CPU ms": r.apiCpuMsPerRequest,
      "pipeline CPU ms": r.pipelineCpuMsPerRequest,
      "Redis CPU ms": Number((r.redisCpuUsPerRequest / 1000).toFixed(3)),
      "RabbitMQ CPU ms": r.rabbitmqCpuMsPerRequest,
      "PostgreSQL CPU ms": r.postgresCpuMsPerRequest,
      "load CPU ms": r.loadCpuMsPerRequest,
      "Redis cmds": r.redisCommandsPerRequest,
      "script calls": r.redisScriptsPerRequest,
      "round trips": r.redisRoundTripsPerRequest,
      "Redis bytes": r.redisBytesPerRequest,
      "hot counts hit rate": r.hotCountsHitRate ?? "none kept",
      "staleness p99 ms": r.hotCountsStalenessP99Ms ?? "",
    })),
  );
  for (const r of results) console.log(`  ${r.scenario} (${r.mode}), Redis commands per request: ${r.redisTopCommands}`);
}

function printAgainstRedisAlone(results: HttpResults, raw: RedisAlone): void {
  for (const l of results.lags) {
    console.log(
      `  hot counts (${l.mode}): a like shows in counts read through the service (each read on a new connection, any API process) ` +
        `${l.p50Ms} ms (p50) / ${l.p99Ms} ms (p99) / ${l.maxMs} ms (max) after its answer, over ${l.likes} likes; ${l.staleReads} reads showed the count before it`,
    );
  }
  console.log(
    `\nRedis alone, same run (redis-benchmark, ${connections} connections): ${raw.likes.toLocaleString()} like scripts/s, ${raw.feeds.toLocaleString()} pipelines of 100 HGETALL/s`,
  );
  for (const v of results.views) {
    console.log(
      `  ${v.http.scenario} (${v.http.mode}): ${v.hotViewsPerSecond.toLocaleString()} views/s of the hot post counted (${v.http.requestsPerSecond.toLocaleString()} requests/s of ${v.perRequest}), ` +
        `${v.redisScriptsPerSecond} Redis script calls/s (the flushes of every post viewed), exact: ${v.http.exact}`,
    );
  }
  for (const r of results.http) {
    const membership = ["like-hot", "like-spread", "collect-hot", "follow-hot"].includes(r.scenario);
    const [ceiling, what] = membership ? [raw.likes, "like scripts"] : r.scenario === "feed100" ? [raw.feeds, "pipelines of 100 HGETALL"] : [null, ""];
    if (ceiling)
      console.log(
        `  ${r.scenario} (${r.mode}): ${r.requestsPerSecond.toLocaleString()} req/s = ${((100 * r.requestsPerSecond) / ceiling).toFixed(1)}% of Redis alone's ${what}`,
      );
  }
}

/** The runs of `scale`, with the cores each kept busy, then the ratios against their targets. */
export function printScale(runs: readonly ScaleRun[], mode: ServiceMode, shapeName: string): void {
  // CPU per request times requests per second: the cores each kept busy on average.
  const coreParts = (r: HttpFigures): [string, number][] => [
    ["API", (r.apiCpuMsPerRequest * r.requestsPerSecond) / 1e3],
    ...(mode === "npm start" ? [["pipeline", (r.pipelineCpuMsPerRequest * r.requestsPerSecond) / 1e3] as [string, number]] : []),
    ["load", (r.loadCpuMsPerRequest * r.requestsPerSecond) / 1e3],
    ["Redis", (r.redisCpuUsPerRequest * r.requestsPerSecond) / 1e6],
    ["PostgreSQL", (r.postgresCpuMsPerRequest * r.requestsPerSecond) / 1e3],
  ];
  const coresOf = (r: HttpFigures) => {
    const parts = coreParts(r);
    return `${parts.map(([, n]) => n.toFixed(2)).join(" + ")} = ${parts.reduce((total, [, n]) => total + n, 0).toFixed(2)}`;
  };
  const names = runs[0]
    ? coreParts(runs[0].figures)
        .map(([name]) => name)
        .join(" + ")
    : "";
  console.log(
    `\nscale: ${mode === "API only" ? "the API alone (PIPELINE=off)" : "`npm start`"} with 1 and 2 API processes, against one Redis and a 3-master Redis Cluster, ` +
      `on the ${shapeName} data set, ${connections} connections; this machine's ${availableParallelism()} cores carry the load generator, the API processes, Redis, PostgreSQL and whatever else runs here:`,
  );
  console.table(
    runs.map(({ redis: label, apiProcesses, figures: r }) => ({
      Redis: label,
      "API processes": apiProcesses,
      scenario: r.scenario,
      "req/s": r.requestsPerSecond,
      "p50 ms": r.p50Ms,
      "p99 ms": r.p99Ms,
      failures: r.failures,
      exact: r.exact,
      "API CPU ms/req": r.apiCpuMsPerRequest,
      ...(mode === "npm start" ? { "pipeline CPU ms/req": r.pipelineCpuMsPerRequest } : {}),
      "load CPU ms/req": r.loadCpuMsPerRequest,
      "Redis cmds/req": r.redisCommandsPerRequest,
      "round trips/req": r.redisRoundTripsPerRequest,
      "Redis CPU µs/req": r.redisCpuUsPerRequest,
      [`cores: ${names}`]: coresOf(r),
      "machine busy cores": r.machineCores,
    })),
  );
  console.log("\nscale: ratios of req/s (like-hot's meet a target only when both runs were exact):");
  console.table(
    scaleRatios(runs).map((q) => ({
      scenario: q.scenario,
      compared: q.compared,
      ratio: `${q.ratio.toFixed(2)}×`,
      target: `≥ ${q.target.toFixed(q.target < 1 ? 2 : 1)}${q.targeted ? "" : " (like-hot's, for comparison)"}`,
      met: q.met ? "✓" : q.exact ? "✗" : "✗ (not exact)",
    })),
  );
}
