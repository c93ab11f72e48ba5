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
import path from "node:path";
import { loadConfig } from "../../src/config.js";
import { loadDataset, type Dataset } from "./dataset.js";
import { prepareDatabase, type ServiceMode } from "./harness.js";
import { printHttp, printLive, printScale } from "./http-report.js";
import { issueTokens, runHttpServices } from "./http-runs.js";
import { likes20m } from "./likes-20m.js";
import { measureMemory } from "./memory.js";
import { addComments, measureNested, type NestedFigures } from "./nested.js";
import { parseOptions } from "./options.js";
import { persist } from "./persist.js";
import { startPrivateCluster, startPrivateRedis, type BenchRedis } from "./private-redis.js";
import { progressBar } from "./progress-bar.js";
import { freshVhost } from "./rabbitmq.js";
import { rawFeedPipelines, rawLikeScript } from "./raw-redis.js";
import { loadBigTarget, reconcileBigPass } from "./reconcile-big.js";
import { reconcileScenario } from "./reconcile.js";
import { printLikes20m, printMemory, printNested, printPersist, printReconcile, printReconcileBig, printStartup } from "./report.js";
import { scale } from "./scale.js";
import { FreshPairs } from "./scenario-context.js";
import { httpScenarios } from "./scenarios.js";
import { measureStartup } from "./startup.js";
import { warmRedis } from "./warm-redis.js";

const options = parseOptions();
const { chosen, shape } = options;

const config = loadConfig();
const databaseUrl = (() => {
  const url = new URL(config.databaseUrl);
  url.pathname = `/${options.database}`;
  return url.toString();
})();

const redis = await startPrivateRedis({ replica: options.replica });
const sql = await prepareDatabase(databaseUrl);
const amqp = freshVhost(config.amqpUrl, options.database);

async function loadData(): Promise<Dataset> {
  const bar = progressBar(`loading the ${shape.name} data set into PostgreSQL (COPY), likes`);
  const data = await loadDataset(sql, shape, (done, total) => bar.update(done, total));
  bar.stop();
  console.error(
    `  ${data.likerIds.length.toLocaleString()} likers, ${data.idleIds.length.toLocaleString()} idle users, ${data.postIds.length.toLocaleString()} posts, ${data.likes.toLocaleString()} likes`,
  );
  return data;
}

async function runNested(data: Dataset): Promise<void> {
  const comments = await addComments(sql, data);
  console.error(`nested: ${comments.toLocaleString()} comments on the newest 100 posts; the query against the API alone ...`);
  const env = { DATABASE_URL: databaseUrl, REDIS_URL: redis.url, AMQP_URL: amqp };
  const figures: NestedFigures[] = [
    await measureNested(databaseUrl, "this, as configured", env),
    await measureNested(databaseUrl, "this, MAX_QUERY_COST=1e9", { ...env, MAX_QUERY_COST: "1000000000" }),
  ];
  if (options.against !== undefined) {
    const directory = path.resolve(options.against);
    figures.push(await measureNested(databaseUrl, `${path.basename(directory)}, as configured`, { ...env, RABBITMQ_PREFIX: "likes_bench_other" }, directory));
  }
  printNested(figures);
}

/** The HTTP scenarios and live-hot (when `wantsRuns`), then scale against the cluster, if one was started. */
async function runHttp(data: Dataset, wantsRuns: boolean, cluster: BenchRedis | undefined): Promise<void> {
  console.error("signing tokens ...");
  const tokens = await issueTokens([...data.likerIds, ...data.idleIds]);
  const token = (id: bigint) => tokens.get(id) as string;
  const fresh = new FreshPairs(data);
  const results = wantsRuns ? await runHttpServices({ options, data, redis, databaseUrl, amqp, token, fresh }) : { http: [], views: [], lags: [], live: [] };
  if (results.live.length > 0) printLive(results.live);
  if (results.http.length > 0) {
    console.error("raw Redis: like script and pipelines of 100 HGETALL (redis-benchmark) ...");
    const likes = rawLikeScript(redis);
    const feeds = await rawFeedPipelines(redis, data.postIds);
    printHttp(results, shape.name, { likes, feeds });
  }

  if (cluster) {
    // The pipeline would take cores from the API processes whose scaling is measured, so the API runs alone unless --mode says otherwise.
    const mode: ServiceMode = options.mode === "npm-start" ? "npm start" : "API only";
    const { durationSeconds, warmUpSeconds } = options;
    const scaleRuns = await scale({
      redises: [redis, cluster],
      mode,
      env: { DATABASE_URL: databaseUrl, AMQP_URL: amqp },
      profileDir: options.profileDir,
      context: { data, durationSeconds, warmUpSeconds, token, fresh },
    });
    printScale(scaleRuns, mode, shape.name);
  }
}

let cluster: BenchRedis | undefined;
try {
  const wantsRuns = httpScenarios.some((s) => chosen.has(s)) || chosen.has("live-hot");
  const wantsHttp = wantsRuns || chosen.has("scale");
  if (wantsHttp || chosen.has("memory") || chosen.has("nested")) {
    const data = await loadData();
    const memoryBefore = await redis.client.info("memory");
    const warmSeconds = await warmRedis(redis, data, databaseUrl);
    console.error(`  Redis warmed in ${warmSeconds.toFixed(1)} s`);
    if (chosen.has("scale")) {
      cluster = await startPrivateCluster();
      const clusterSeconds = await warmRedis(cluster, data, databaseUrl);
      console.error(`  Redis Cluster warmed in ${clusterSeconds.toFixed(1)} s`);
    }
    if (chosen.has("memory")) printMemory(await measureMemory(redis, data, memoryBefore), shape.name);
    if (chosen.has("nested")) await runNested(data);
    if (wantsHttp) await runHttp(data, wantsRuns, cluster);
  }

  if (chosen.has("startup")) {
    console.error("startup: an API process and a worker, compiled and through tsx, 5 runs each ...");
    printStartup(await measureStartup({ DATABASE_URL: databaseUrl, REDIS_URL: redis.url, AMQP_URL: amqp }));
  }
  if (chosen.has("persist")) {
    console.error("persist: outbox → RabbitMQ → PostgreSQL through a worker process ...");
    const p = await persist(redis, sql, databaseUrl, amqp);
    console.log("\nPersistence into PostgreSQL (worker process, batches of up to 1,000):");
    printPersist(p);
  }
  if (chosen.has("reconcile")) {
    console.error("reconcile: 1,000,000 likes over 10,000 posts ...");
    printReconcile(await reconcileScenario(redis, sql, databaseUrl, amqp));
  }
  if (chosen.has("likes-20m")) {
    console.error("likes-20m: 20,271,764 likes over 1,000,000 posts ...");
    printLikes20m(await likes20m(redis, databaseUrl, amqp, config.relationPartitions));
  }
  if (chosen.has("reconcile-big")) {
    console.error("reconcile-big: one post with 5,000,000 likers ...");
    const loadSeconds = await loadBigTarget(redis, sql);
    console.error(`  loaded in ${loadSeconds.toFixed(0)} s; a pass in pieces (RECONCILE_MEMBER_CHUNK=10000) ...`);
    const chunked = await reconcileBigPass(redis, databaseUrl, amqp, 10_000);
    console.error("  a pass loading the target whole (RECONCILE_MEMBER_CHUNK=100000000), as before ...");
    const whole = await reconcileBigPass(redis, databaseUrl, amqp, 100_000_000);
    printReconcileBig(chunked, whole);
  }
} finally {
  await sql.end();
  await cluster?.stop();
  await redis.stop();
}
