// The load of one HTTP scenario, run by autocannon against the service, and
// what each request cost every process and server over the run.
import autocannon from "autocannon";
import { scrapeMetrics, type RunningService } from "./harness.js";
import type { BenchRedis, RedisCounters } from "./private-redis.js";
import { cpuBetween, machineBusySeconds, otherServersCpu } from "./process-cpu.js";

export const connections = 64;

export interface HttpFigures {
  readonly scenario: string;
  readonly mode: string;
  readonly requests: number;
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly failures: number;
  readonly redisCommandsPerRequest: number;
  /** Calls of Lua scripts (EVALSHA, EVAL and their read-only forms) per request. */
  readonly redisScriptsPerRequest: number;
  /** The commands Redis ran most per request, inside scripts or not: "name count, …". */
  readonly redisTopCommands: string;
  readonly redisRoundTripsPerRequest: number;
  readonly redisBytesPerRequest: number;
  readonly redisCpuUsPerRequest: number;
  readonly apiCpuMsPerRequest: number;
  readonly pipelineCpuMsPerRequest: number;
  readonly rabbitmqCpuMsPerRequest: number;
  readonly postgresCpuMsPerRequest: number;
  readonly loadCpuMsPerRequest: number;
  /** Cores the whole machine kept busy on average during the run: the service, Redis, the load and whatever else runs here. */
  readonly machineCores: number;
  /** Of the targets a request read, the share answered from the API processes' hot counts; null when it kept none. */
  readonly hotCountsHitRate: number | null;
  /** Over the reads answered from hot counts, the 99th percentile of how stale they could be (ms, a histogram bucket's bound). */
  readonly hotCountsStalenessP99Ms: number | null;
  /** Whether counts moved by exactly the acknowledged changes, where the scenario changes any. */
  readonly exact: string;
}

/** A membership one request asks for: `user` joins `target` (a post, or a user to follow). */
export interface Pair {
  readonly user: bigint;
  readonly target: bigint;
}

/** What one request of a scenario sends, and the membership it asks for, if any. */
export interface Request {
  readonly body: string;
  readonly token: string;
  readonly change?: Pair;
}

export interface Load {
  readonly scenario: string;
  readonly mode: string;
  readonly service: RunningService;
  readonly redis: BenchRedis;
  readonly request: (n: number) => Request;
  /** How long the load runs, unless `amount` is given. */
  readonly durationSeconds: number;
  /** Exactly this many requests instead of a duration. */
  readonly amount?: number;
  /** Sees every answered request that asked for a membership, with its body. */
  readonly onChangeAnswered?: (change: Pair, body: string) => void;
  /** Sees every answer's body. */
  readonly onAnswered?: (body: string) => void;
}

export const round = (n: number, digits = 0) => Number(n.toFixed(digits));

const scriptCommands = ["evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro"];

function callsBetween(before: RedisCounters, after: RedisCounters): [string, number][] {
  return [...after.byCommand].map(([name, calls]) => [name, calls - (before.byCommand.get(name) ?? 0)]);
}

function scriptCallsBetween(before: RedisCounters, after: RedisCounters): number {
  return callsBetween(before, after).reduce((n, [name, calls]) => n + (scriptCommands.includes(name) ? calls : 0), 0);
}

/** The twelve commands run most between two samples, per request; the samples' own INFO left out. */
function topCommands(before: RedisCounters, after: RedisCounters, requests: number): string {
  return callsBetween(before, after)
    .filter(([name, calls]) => name !== "info" && calls > 0)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 12)
    .map(([name, calls]) => `${name} ${round(calls / Math.max(1, requests), 1)}`)
    .join(", ");
}

export async function runLoad(load: Load): Promise<Omit<HttpFigures, "exact">> {
  let next = 0;
  let failures = 0;
  const redisBefore: RedisCounters = await load.redis.counters();
  const cpuBefore = load.service.cpu();
  const othersBefore = otherServersCpu();
  const metricsBefore = await scrapeMetrics(load.service.metricsUrl);
  const ownBefore = process.cpuUsage();
  const machineBefore = machineBusySeconds();
  // Timed here, to the last answer: autocannon ends a run only at its next one-second sample, so
  // its duration (and the end of its callback) rounds a run of a fixed amount up to whole seconds
  // (20,000 likes read as "3,328/s" whatever their real rate).
  const startedMs = performance.now();
  let lastAnswerMs = startedMs;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    autocannon(
      {
        url: load.service.url,
        connections,
        // autocannon shares an amount out over the connections exactly; a duration it stops only at its next sample.
        ...(load.amount === undefined ? { duration: load.durationSeconds } : { amount: load.amount }),
        requests: [
          {
            method: "POST",
            // One request in flight per connection, so the connection's context tells which change an answer is for.
            setupRequest: (req, context: { change?: Pair }) => {
              const { body, token, change } = load.request(next++);
              context.change = change;
              // An empty token is an anonymous request: no Authorization header at all.
              return { ...req, body, headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) } };
            },
            onResponse: (status, body, context: { change?: Pair }) => {
              lastAnswerMs = performance.now();
              if (status !== 200 || body.includes('"errors"')) failures++;
              if (context.change) load.onChangeAnswered?.(context.change, body);
              load.onAnswered?.(body);
            },
          },
        ],
      },
      // autocannon types its error as any; it is an Error when set.
      (error: Error | null, result) => (error ? reject(error) : resolve(result)),
    );
  });
  const elapsedSeconds = (lastAnswerMs - startedMs) / 1000;
  const own = process.cpuUsage(ownBefore);
  const machine = machineBusySeconds() - machineBefore;
  const cpuAfter = load.service.cpu();
  const othersAfter = otherServersCpu();
  const redisAfter = await load.redis.counters();
  const metricsAfter = await scrapeMetrics(load.service.metricsUrl);
  const requests = result.requests.total;
  const per = (n: number) => n / Math.max(1, requests);
  return {
    scenario: load.scenario,
    mode: load.mode,
    requests,
    requestsPerSecond: Math.round(requests / elapsedSeconds),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    maxMs: result.latency.max,
    failures: failures + result.errors + result.timeouts + result.non2xx,
    // The two INFO samples count one command and one read of the bench's own on each server between them.
    redisCommandsPerRequest: round(per(redisAfter.commands - redisBefore.commands - load.redis.servers), 1),
    redisScriptsPerRequest: round(per(scriptCallsBetween(redisBefore, redisAfter)), 2),
    redisTopCommands: topCommands(redisBefore, redisAfter, requests),
    redisRoundTripsPerRequest: round(per(redisAfter.reads - redisBefore.reads - load.redis.servers), 2),
    redisBytesPerRequest: Math.round(per(redisAfter.bytesIn - redisBefore.bytesIn + redisAfter.bytesOut - redisBefore.bytesOut)),
    redisCpuUsPerRequest: round(per((redisAfter.cpuSeconds - redisBefore.cpuSeconds) * 1e6)),
    apiCpuMsPerRequest: round(per((cpuAfter.api - cpuBefore.api) * 1e3), 3),
    pipelineCpuMsPerRequest: round(per((cpuAfter.pipeline - cpuBefore.pipeline) * 1e3), 3),
    rabbitmqCpuMsPerRequest: round(per(cpuBetween(othersBefore.rabbitmq, othersAfter.rabbitmq) * 1e3), 3),
    postgresCpuMsPerRequest: round(per(cpuBetween(othersBefore.postgres, othersAfter.postgres) * 1e3), 3),
    loadCpuMsPerRequest: round(per((own.user + own.system) / 1e3), 3),
    machineCores: round(machine / elapsedSeconds, 2),
    ...hotCountsFigures(metricsBefore, metricsAfter),
  };
}

/** The hot counts' hit rate and staleness over a run, from the service's metrics before and after it. */
function hotCountsFigures(
  before: ReadonlyMap<string, number>,
  after: ReadonlyMap<string, number>,
): Pick<HttpFigures, "hotCountsHitRate" | "hotCountsStalenessP99Ms"> {
  const delta = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
  const hits = delta("likes_hot_counts_hits_total");
  const reads = hits + delta("likes_hot_counts_misses_total");
  const bucket = /^likes_hot_counts_staleness_bound_seconds_bucket\{le="([^"]+)"\}$/;
  const buckets = [...after.keys()]
    .flatMap((name) => {
      const le = bucket.exec(name)?.[1];
      return le === undefined || le === "+Inf" ? [] : [{ le: Number(le), count: delta(name) }];
    })
    .sort((x, y) => x.le - y.le);
  const served = delta("likes_hot_counts_staleness_bound_seconds_count");
  const p99 = served > 0 ? buckets.find((b) => b.count >= 0.99 * served)?.le : undefined;
  return {
    hotCountsHitRate: reads > 0 ? round(hits / reads, 3) : null,
    hotCountsStalenessP99Ms: p99 === undefined ? null : round(p99 * 1000, 1),
  };
}
