// npm run bench [-- [--quick] [--mode npm-start|api-only] [--profile dir] [--against dir] [--database name] [scenario ...]]
//
// Measures the service on realistic data (scripts/bench/dataset.ts) and prints
// figures and same-run ratios to Redis alone. Each HTTP scenario also prints what a
// request cost every process and server, and the share of targets the API
// processes answered from their hot counts; feed100 is followed by the lag from a
// like's answer to the count read back through the service. Scenarios:
//   feed100, like-hot, like-spread, mixed,  over HTTP, against the service as `npm start`
//   collect-hot, follow-hot, views-hot,     runs it and against the API alone (PIPELINE=off)
//   views-hot-batched, hot-posts
//   live-hot                                1,000 graphql-ws subscribers of the hot post while it takes
//                                           2,000 likes/s for 10 s: lag from like to message, messages per
//                                           subscriber per second, API CPU; not run unless named
//   memory                                  Redis memory of the warmed data set
//   persist                                 outbox → RabbitMQ → PostgreSQL in a worker process
//   reconcile                               rebuild and a full reconcile pass over 1,000,000 likes
//   reconcile-big                           a reconcile pass over one post with 5,000,000 likers, in pieces
//                                           within the 160 MB heap of npm run reconcile (and, for contrast,
//                                           loaded whole as passes did before); not run unless named
//   likes-20m                               20,271,764 likes over 1,000,000 posts loaded once into a database of its
//                                           own (`--database`_20m, dropped after): the migration that partitions
//                                           the relation tables, list pages before and after it, rebuild of the
//                                           hottest post and of every post, a reconcile pass, and persist beside
//                                           them; about an hour, and 15 GB of disk; not run unless named
//   nested                                  feed(100) → comments(100) → post → comments(100) sent once
//                                           to the API as configured and with the cost limit lifted (and
//                                           to `--against`'s as configured); not run unless named
//   scale                                   feed100 and like-hot with 1 and 2 API processes (WEB_CONCURRENCY),
//                                           against the private Redis and against a private 3-master Redis
//                                           Cluster (scripts/redis-cluster.sh, free ports from 7301 on) warmed
//                                           the same way; the API alone unless `--mode` says otherwise; prints
//                                           the ratios 2/1 processes and cluster/single; not run unless named
//   startup                                 an API process and a worker from spawn to serving, and their
//                                           memory then, compiled (dist/) and through tsx, 5 runs each;
//                                           not run unless named
// With no scenario named, the four HTTP scenarios and memory run. `--quick` loads a
// tenth of the data for development; the figures in docs/performance.md come from the full set.
// `--profile dir` has every process of the service write a CPU profile into dir.
// `--against dir` also runs the HTTP scenarios against the service of another
// checkout (a git worktree of an earlier commit, with its npm ci done), each mode
// this one then that one, so the two are compared on the same data in one run.
// `--replica` gives the bench's Redis a replica (both checkouts use it); `--set KEY=VALUE`
// (repeatable) sets a setting of this checkout's service only: `--replica --set
// REDIS_REPLICA_ACKS=1 --against <checkout of the same commit>` is what acks cost.
// `--database name` (default likes_bench) names the bench's database and RabbitMQ vhost,
// so two checkouts can run benches on one machine at once.
import { availableParallelism } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { SingleBar, Presets } from "cli-progress";
import { compose } from "../../src/compose.js";
import { loadConfig } from "../../src/config.js";
import { createTokenService } from "../../src/graphql/tokens.js";
import type { Target } from "../../src/domain/model/index.js";
import { createLogger } from "../../src/process/logger.js";
import { createDatabase } from "../../src/stores/postgres/database.js";
import { loadDataset, quick, realistic, type Dataset } from "./dataset.js";
import { benchSecret, prepareDatabase, startService, type ServiceMode } from "./harness.js";
import { startPrivateCluster, startPrivateRedis, type BenchRedis } from "./private-redis.js";
import { measureMemory } from "./memory.js";
import { persist, type PersistFigures } from "./persist.js";
import { measureStartup } from "./startup.js";
import { freshVhost } from "./rabbitmq.js";
import { reconcileScenario } from "./reconcile.js";
import { addComments, measureNested, type NestedFigures } from "./nested.js";
import { loadBigTarget, reconcileBigPass } from "./reconcile-big.js";
import { liveHot, type LiveFigures } from "./live.js";
import { likes20m } from "./likes-20m.js";
import { scale, scaleRatios, scaleRunCount, type ScaleRun } from "./scale.js";
import { connections, type HttpFigures } from "./http-load.js";
import { rawFeedPipelines, rawLikeScript } from "./raw-redis.js";
import type { LagFigures } from "./read-scenarios.js";
import { FreshPairs, type ScenarioContext } from "./scenario-context.js";
import { httpScenarios, runHttpScenario } from "./scenarios.js";
import type { ViewsFigures } from "./view-scenarios.js";

const all = [...httpScenarios, "live-hot", "likes-20m", "memory", "nested", "persist", "reconcile", "reconcile-big", "scale", "startup"] as const;
type Scenario = (typeof all)[number];

const { values: flags, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    quick: { type: "boolean", default: false },
    mode: { type: "string" },
    profile: { type: "string" },
    against: { type: "string" },
    database: { type: "string", default: "likes_bench" },
    replica: { type: "boolean", default: false },
    set: { type: "string", multiple: true, default: [] },
  },
});
const settings = flags.set.map((pair) => pair.split("=", 2) as [string, string | undefined]);
const unknown = positionals.filter((s) => !(all as readonly string[]).includes(s));
const modes: ServiceMode[] =
  flags.mode === undefined ? ["npm start", "API only"] : flags.mode === "npm-start" ? ["npm start"] : flags.mode === "api-only" ? ["API only"] : [];
if (unknown.length || modes.length === 0 || settings.some(([, value]) => value === undefined)) {
  console.error(
    `Usage: npm run bench -- [--quick] [--mode npm-start|api-only] [--profile dir] [--against dir] [--replica] [--set KEY=VALUE ...] [--database name] [${all.join("|")} ...]`,
  );
  process.exit(2);
}
const chosen = new Set<Scenario>(positionals.length ? (positionals as Scenario[]) : [...httpScenarios, "memory"]);
const shape = flags.quick ? quick : realistic;
const durationSeconds = flags.quick ? 5 : 10;
const warmUpSeconds = flags.quick ? 2 : 3;

const config = loadConfig();
const databaseUrl = (() => {
  const url = new URL(config.databaseUrl);
  url.pathname = `/${flags.database}`;
  return url.toString();
})();

function progressBar(label: string) {
  const bar = new SingleBar(
    { format: `${label} [{bar}] {value}/{total} | {eta_formatted} left`, etaBuffer: 50, stream: process.stderr },
    Presets.shades_classic,
  );
  let started = false;
  return {
    update(done: number, total: number) {
      if (!started) bar.start(total, 0);
      started = true;
      bar.setTotal(total);
      bar.update(done);
    },
    stop: () => started && bar.stop(),
  };
}

/** Fills an empty private Redis (or Redis Cluster) from PostgreSQL through the service's own rebuild, as a new Redis fills in production. */
async function warmRedis(redis: BenchRedis, data: Dataset): Promise<number> {
  const db = createDatabase({ url: databaseUrl, poolSize: 8 });
  const app = compose(loadConfig({ ...process.env, DATABASE_URL: databaseUrl, ...redis.env }), { db, redis: redis.client }, createLogger("warn", "bench"));
  const services = app.services;
  const targets: Target[] = [...data.postIds.map((id): Target => ({ type: "post", id })), ...data.likerIds.map((id): Target => ({ type: "user", id }))];
  const bar = progressBar(`warming the ${redis.label} Redis through the rebuild`);
  const started = Date.now();
  for (let i = 0; i < targets.length; i += 16) {
    await Promise.all(targets.slice(i, i + 16).map((t) => services.counters.rebuild(t)));
    if (i % 512 === 0) bar.update(i, targets.length);
  }
  bar.update(targets.length, targets.length);
  bar.stop();
  // Each liker's member index of likes, loaded from PostgreSQL as their first feed loads it
  // (a standalone Redis keeps them, with AOF, across restarts; a cluster keeps none).
  const indexes = app.memberIndexes;
  if (indexes) {
    const indexBar = progressBar(`loading the likers' member indexes`);
    for (let i = 0; i < data.likerIds.length; i += 500) {
      for (const id of data.likerIds.slice(i, i + 500)) indexes.missing("like", "post", id);
      await indexes.idle();
      indexBar.update(i, data.likerIds.length);
    }
    indexBar.update(data.likerIds.length, data.likerIds.length);
    indexBar.stop();
  }
  // The hot ranking, rebuilt from PostgreSQL as a worker does when Redis lacks it.
  await app.rankings.refresh();
  await db.$disconnect();
  return (Date.now() - started) / 1000;
}

/** The runs of `scale`, with the cores each kept busy, then the ratios against their targets. */
function printScale(runs: readonly ScaleRun[], mode: ServiceMode): void {
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
      `on the ${shape.name} data set, ${connections} connections; this machine's ${availableParallelism()} cores carry the load generator, the API processes, Redis, PostgreSQL and whatever else runs here:`,
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

function printPersist(p: PersistFigures): void {
  console.table([
    {
      "drained likes": p.drainedLikes,
      "persisted likes/s": p.persistedPerSecond,
      "transactions per 1,000": p.transactionsPer1000,
      [`lag p50 ms at ${p.pacedRate}/s`]: p.lagP50Ms,
      [`lag p99 ms at ${p.pacedRate}/s`]: p.lagP99Ms,
    },
  ]);
}

async function issueTokens(ids: readonly bigint[]): Promise<Map<bigint, string>> {
  const tokens = createTokenService({ secret: benchSecret, ttlSeconds: 6 * 3600 });
  const byUser = new Map<bigint, string>();
  for (let i = 0; i < ids.length; i += 2_000) {
    const chunk = ids.slice(i, i + 2_000);
    (await Promise.all(chunk.map((id) => tokens.issue(id)))).forEach((token, j) => byUser.set(chunk[j] as bigint, token));
  }
  return byUser;
}

const redis = await startPrivateRedis({ replica: flags.replica });
const sql = await prepareDatabase(databaseUrl);
const amqp = freshVhost(config.amqpUrl, flags.database);
const results: HttpFigures[] = [];
const viewResults: ViewsFigures[] = [];
const liveResults: LiveFigures[] = [];
const lagResults: LagFigures[] = [];
let cluster: BenchRedis | undefined;
try {
  const wantsRuns = httpScenarios.some((s) => chosen.has(s)) || chosen.has("live-hot");
  const wantsHttp = wantsRuns || chosen.has("scale");
  if (wantsHttp || chosen.has("memory") || chosen.has("nested")) {
    const bar = progressBar(`loading the ${shape.name} data set into PostgreSQL (COPY), likes`);
    const data = await loadDataset(sql, shape, (done, total) => bar.update(done, total));
    bar.stop();
    console.error(
      `  ${data.likerIds.length.toLocaleString()} likers, ${data.idleIds.length.toLocaleString()} idle users, ${data.postIds.length.toLocaleString()} posts, ${data.likes.toLocaleString()} likes`,
    );
    const memoryBefore = await redis.client.info("memory");
    const warmSeconds = await warmRedis(redis, data);
    console.error(`  Redis warmed in ${warmSeconds.toFixed(1)} s`);
    if (chosen.has("scale")) {
      cluster = await startPrivateCluster();
      const clusterSeconds = await warmRedis(cluster, data);
      console.error(`  Redis Cluster warmed in ${clusterSeconds.toFixed(1)} s`);
    }
    if (chosen.has("memory")) {
      const m = await measureMemory(redis, data, memoryBefore);
      console.log(
        `\nRedis memory of the ${shape.name} data set, warmed through the rebuild (${m.likes.toLocaleString()} likes, ${m.targets.toLocaleString()} targets):`,
      );
      console.table([
        {
          "bytes/like (membership)": m.bytesPerLike,
          "bytes/counter hash": m.bytesPerCounterHash,
          "membership keys": m.membershipKeys,
          "largest key (members)": m.largestKeyMembers,
          "used_memory (MB)": m.usedMemoryMb,
        },
      ]);
    }

    if (chosen.has("nested")) {
      const comments = await addComments(sql, data);
      console.error(`nested: ${comments.toLocaleString()} comments on the newest 100 posts; the query against the API alone ...`);
      const env = { DATABASE_URL: databaseUrl, REDIS_URL: redis.url, AMQP_URL: amqp };
      const figures: NestedFigures[] = [
        await measureNested(databaseUrl, "this, as configured", env),
        await measureNested(databaseUrl, "this, MAX_QUERY_COST=1e9", { ...env, MAX_QUERY_COST: "1000000000" }),
      ];
      if (flags.against !== undefined) {
        const directory = path.resolve(flags.against);
        figures.push(
          await measureNested(databaseUrl, `${path.basename(directory)}, as configured`, { ...env, RABBITMQ_PREFIX: "likes_bench_other" }, directory),
        );
      }
      console.log(`\nThe nested query (feed(100) → comments(100) → post → comments(100)), anonymous, one request to a freshly started API:`);
      console.table(
        figures.map((f) => ({
          service: f.service,
          status: f.status,
          code: f.code,
          cost: f.cost,
          "time (s)": f.seconds,
          "SQL transactions": f.sqlTransactions,
          nodes: f.nodes,
          "response (MB)": f.responseMb,
          "API peak RSS (MB)": f.apiPeakRssMb,
          "API CPU (s)": f.apiCpuSeconds,
        })),
      );
    }

    if (wantsHttp) {
      console.error("signing tokens ...");
      const tokens = await issueTokens([...data.likerIds, ...data.idleIds]);
      const token = (id: bigint) => tokens.get(id) as string;
      const fresh = new FreshPairs(data);
      const services =
        flags.against === undefined
          ? [{ label: "", directory: undefined }]
          : [
              { label: "", directory: undefined },
              { label: ` @ ${path.basename(path.resolve(flags.against))}`, directory: path.resolve(flags.against) },
            ];
      const runs = wantsRuns ? modes.flatMap((mode) => services.map((s) => ({ mode, ...s }))) : [];
      for (const { mode, label, directory } of runs) {
        // The other checkout gets queues of its own: its messages need not be readable by this one's consumers.
        const env = {
          DATABASE_URL: databaseUrl,
          REDIS_URL: redis.url,
          AMQP_URL: amqp,
          ...(directory ? { RABBITMQ_PREFIX: "likes_bench_other" } : Object.fromEntries(settings)),
        };
        const service = await startService(mode, env, { profileDir: flags.profile, directory });
        try {
          const ctx: ScenarioContext = { data, redis, service, mode: `${mode}${label}`, durationSeconds, warmUpSeconds, token, fresh };
          // Each run may use its share of the users who have not liked the hot post (scale's runs included), and 20,000 at most.
          const hotLikes = Math.min(20_000, Math.floor(data.idleIds.length / (runs.length + (chosen.has("scale") ? scaleRunCount : 0))));
          for (const scenario of httpScenarios) {
            if (chosen.has(scenario)) await runHttpScenario(ctx, scenario, hotLikes, { http: results, views: viewResults, lags: lagResults });
          }
          if (chosen.has("live-hot")) {
            console.error(`live-hot (${ctx.mode}): 1,000 subscribers, 2,000 likes/s ...`);
            liveResults.push(await liveHot(ctx, { subscribers: 1_000, likesPerSecond: 2_000, seconds: durationSeconds }));
          }
        } finally {
          await service.stop();
        }
      }

      if (liveResults.length > 0) {
        console.log(
          `\nLive counts (graphql-ws): subscribers of the hot post while it takes likes at a fixed rate; lag from a like's answer to each subscriber's first message holding it:`,
        );
        console.table(
          liveResults.map((l) => ({
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
      if (results.length > 0) {
        console.error("raw Redis: like script and pipelines of 100 HGETALL (redis-benchmark) ...");
        const rawLikes = rawLikeScript(redis);
        const rawFeeds = await rawFeedPipelines(redis, data.postIds);
        console.log(
          `\nThe service over HTTP on the ${shape.name} data set, ${connections} connections, this machine (load generator, service, Redis, RabbitMQ and PostgreSQL share its cores):`,
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
        for (const l of lagResults) {
          console.log(
            `  hot counts (${l.mode}): a like shows in counts read through the service (each read on a new connection, any API process) ` +
              `${l.p50Ms} ms (p50) / ${l.p99Ms} ms (p99) / ${l.maxMs} ms (max) after its answer, over ${l.likes} likes; ${l.staleReads} reads showed the count before it`,
          );
        }
        console.log(
          `\nRedis alone, same run (redis-benchmark, ${connections} connections): ${rawLikes.toLocaleString()} like scripts/s, ${rawFeeds.toLocaleString()} pipelines of 100 HGETALL/s`,
        );
        for (const v of viewResults) {
          console.log(
            `  ${v.http.scenario} (${v.http.mode}): ${v.hotViewsPerSecond.toLocaleString()} views/s of the hot post counted (${v.http.requestsPerSecond.toLocaleString()} requests/s of ${v.perRequest}), ` +
              `${v.redisScriptsPerSecond} Redis script calls/s (the flushes of every post viewed), exact: ${v.http.exact}`,
          );
        }
        for (const r of results) {
          const membership = ["like-hot", "like-spread", "collect-hot", "follow-hot"].includes(r.scenario);
          const [ceiling, what] = membership ? [rawLikes, "like scripts"] : r.scenario === "feed100" ? [rawFeeds, "pipelines of 100 HGETALL"] : [null, ""];
          if (ceiling)
            console.log(
              `  ${r.scenario} (${r.mode}): ${r.requestsPerSecond.toLocaleString()} req/s = ${((100 * r.requestsPerSecond) / ceiling).toFixed(1)}% of Redis alone's ${what}`,
            );
        }
      }

      if (cluster) {
        // The pipeline would take cores from the API processes whose scaling is measured, so the API runs alone unless --mode says otherwise.
        const mode: ServiceMode = flags.mode === "npm-start" ? "npm start" : "API only";
        const scaleRuns = await scale({
          redises: [redis, cluster],
          mode,
          env: { DATABASE_URL: databaseUrl, AMQP_URL: amqp },
          profileDir: flags.profile,
          context: { data, durationSeconds, warmUpSeconds, token, fresh },
        });
        printScale(scaleRuns, mode);
      }
    }
  }

  if (chosen.has("startup")) {
    console.error("startup: an API process and a worker, compiled and through tsx, 5 runs each ...");
    const figures = await measureStartup({ DATABASE_URL: databaseUrl, REDIS_URL: redis.url, AMQP_URL: amqp });
    console.log("\nStart-up, one process at a time (median of 5): spawn to serving, and resident memory of the process and its children a second later:");
    console.table(figures.map((f) => ({ entry: f.entry, runtime: f.runtime, "ready ms": f.readyMs, "RSS MB": f.rssMb })));
  }
  if (chosen.has("persist")) {
    console.error("persist: outbox → RabbitMQ → PostgreSQL through a worker process ...");
    const p = await persist(redis, sql, databaseUrl, amqp);
    console.log("\nPersistence into PostgreSQL (worker process, batches of up to 1,000):");
    printPersist(p);
  }
  if (chosen.has("reconcile")) {
    console.error("reconcile: 1,000,000 likes over 10,000 posts ...");
    const r = await reconcileScenario(redis, sql, databaseUrl, amqp);
    console.log("\nRebuild and reconcile, 1,000,000 likes over 10,000 posts (Zipf), every post held by Redis:");
    console.table([
      {
        likes: r.likes,
        "rebuild 10,000 likers (ms)": r.rebuild10kLikersMs,
        "rebuild all posts (s)": r.rebuildAllSeconds,
        "reconcile pass (s)": r.reconcileSeconds,
        "targets/s": r.reconcileTargetsPerSecond,
        "reconcile peak RSS (MB)": r.reconcilePeakRssMb,
      },
    ]);
    console.log(r.summary);
  }
  if (chosen.has("likes-20m")) {
    console.error("likes-20m: 20,271,764 likes over 1,000,000 posts ...");
    const f = await likes20m(redis, databaseUrl, amqp, config.relationPartitions);
    console.log(
      `\n${f.likes.toLocaleString()} likes over ${f.posts.toLocaleString()} posts: loaded in ${f.loadSeconds.toFixed(0)} s (with their relation versions and counters); ` +
        `0007_partition_relations into ${f.relationPartitions} partitions in ${f.migrateSeconds.toFixed(1)} s; database ${f.databaseMb.toLocaleString()} MB after`,
    );
    console.table([
      {
        [`rebuild of post 1, ${f.hotLikers.toLocaleString()} likers (ms)`]: f.rebuildHotMs,
        [`rebuild of ${f.sampledPosts.toLocaleString()} posts (${f.sampledLikes.toLocaleString()} likes), 16 at a time (s)`]: f.rebuildSampleSeconds,
        "extrapolated to all posts, by posts / by likes (s)": `${Math.round((f.rebuildSampleSeconds * f.posts) / f.sampledPosts)} / ${Math.round((f.rebuildSampleSeconds * f.likes) / f.sampledLikes)}`,
        "reconcile pass (s)": f.reconcileSeconds,
        "targets/s": f.reconcileTargetsPerSecond,
        "reconcile peak RSS (MB)": f.reconcilePeakRssMb,
      },
    ]);
    console.log(f.reconcileSummary);
    console.log("\nList pages of 20 (the store's statements), 1,000 distinct users or posts each, warm; one under EXPLAIN ANALYZE:");
    console.table(
      f.pages.map((p) => ({
        page: p.page,
        tables: p.tables,
        "mean ms": p.meanMs,
        "p99 ms": p.p99Ms,
        "EXPLAIN planning ms": p.planningMs,
        "EXPLAIN execution ms": p.executionMs,
        "shared buffers": p.sharedBuffers,
        "index scans": p.indexScans,
      })),
    );
    const p = f.persist;
    console.log("\nPersistence beside them (worker process, batches of up to 1,000):");
    printPersist(p);
  }
  if (chosen.has("reconcile-big")) {
    console.error("reconcile-big: one post with 5,000,000 likers ...");
    const loadSeconds = await loadBigTarget(redis, sql);
    console.error(`  loaded in ${loadSeconds.toFixed(0)} s; a pass in pieces (RECONCILE_MEMBER_CHUNK=10000) ...`);
    const chunked = await reconcileBigPass(redis, databaseUrl, amqp, 10_000);
    console.error("  a pass loading the target whole (RECONCILE_MEMBER_CHUNK=100000000), as before ...");
    const whole = await reconcileBigPass(redis, databaseUrl, amqp, 100_000_000);
    console.log("\nReconcile of one post with 5,000,000 likers, node --max-old-space-size=160 (npm run reconcile):");
    console.table(
      [chunked, whole].map((r, i) => ({
        pass: i === 0 ? "in pieces of 10,000" : "loaded whole",
        "exit code": r.exitCode,
        "pass (s)": Number(r.passSeconds.toFixed(1)),
        "peak heap (MB)": r.peakHeapMb,
        "peak RSS (MB)": r.peakRssMb,
      })),
    );
    console.log(chunked.summary);
    console.log(`loaded whole: ${whole.summary.split("\n")[0]}`);
  }
} finally {
  await sql.end();
  await cluster?.stop();
  await redis.stop();
}
