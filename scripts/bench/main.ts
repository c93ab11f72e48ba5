// npm run bench [-- scenario ...]: measures the service on this machine and prints figures and ratios.
// Scenarios: feed100, like-hot, like-spread (each against the service over HTTP, with a raw
// redis-benchmark run of the like script as the ceiling), persist (outbox → RabbitMQ →
// PostgreSQL: throughput, lag, transactions), reconcile (rebuild and a full pass over 1,000,000
// likes), memory (Redis bytes per like and per target).
import { loadConfig } from "../../src/config.js";
import { prepareDatabase, seed, startPrivateRedis, startServer } from "./harness.js";
import { persist } from "./persist.js";
import { reconcileScenario } from "./reconcile.js";
import { connections, feed100, likeHot, likeSpread, memory, rawLikeScript, type HttpFigures } from "./scenarios.js";

const all = ["feed100", "like-hot", "like-spread", "persist", "reconcile", "memory"] as const;
type Scenario = (typeof all)[number];
const asked = process.argv.slice(2);
const unknown = asked.filter((s) => !(all as readonly string[]).includes(s));
if (unknown.length) {
  console.error(`Unknown scenario ${unknown.join(", ")}; choose from ${all.join(", ")}.`);
  process.exit(2);
}
const chosen = new Set<Scenario>(asked.length ? (asked as Scenario[]) : all);
const likers = 40_000;

const databaseUrl = (() => {
  const url = new URL(loadConfig().databaseUrl);
  url.pathname = "/likes_bench";
  return url.toString();
})();

const redis = await startPrivateRedis();
const sql = await prepareDatabase(databaseUrl);
const results: HttpFigures[] = [];
let raw: number | null = null;
try {
  if (chosen.has("feed100") || chosen.has("like-hot") || chosen.has("like-spread")) {
    console.error("seeding 40,000 users and 10,000 posts ...");
    const seeded = await seed(sql, redis.client, likers, 10_000);
    const server = await startServer({ DATABASE_URL: databaseUrl, REDIS_URL: redis.url });
    try {
      if (chosen.has("feed100")) {
        console.error("feed100 ...");
        results.push(await feed100(server.url, redis, seeded));
      }
      if (chosen.has("like-hot")) {
        console.error("like-hot ...");
        results.push(await likeHot(server.url, redis, seeded, likers));
      }
      if (chosen.has("like-spread")) {
        console.error("like-spread ...");
        results.push(await likeSpread(server.url, redis, seeded, likers));
      }
    } finally {
      await server.stop();
    }
    if (chosen.has("like-hot") || chosen.has("like-spread")) {
      console.error("raw like script (redis-benchmark EVALSHA) ...");
      raw = rawLikeScript(redis);
    }
  }

  if (results.length > 0) {
    const pipeline = process.env.BENCH_PIPELINE === "embedded" ? "with the persistence pipeline in the same process" : "the API alone (PIPELINE=off)";
    console.log(`\nService over HTTP, ${pipeline}, ${connections} connections, this machine (2 cores shared by load generator, service and Redis):`);
  }
  if (results.length > 0) console.table(results.map((r) => ({
    scenario: r.scenario,
    "req/s": r.requestsPerSecond,
    "p50 ms": r.p50Ms,
    "p99 ms": r.p99Ms,
    "Redis round trips/req": r.redisRoundTripsPerRequest,
    failures: r.failures,
    requests: r.requests,
  })));
  for (const r of results) console.log(`  ${r.scenario}: ${r.note}`);
  if (raw !== null) {
    console.log(`\nRaw like script, redis-benchmark EVALSHA, ${connections} connections: ${raw} calls/s`);
    for (const r of results.filter((x) => x.scenario.startsWith("like"))) {
      console.log(`  ${r.scenario}: ${r.requestsPerSecond} req/s = ${((100 * r.requestsPerSecond) / raw).toFixed(1)}% of the raw script`);
    }
  }
  if (chosen.has("persist")) {
    console.error("persist: outbox → RabbitMQ → PostgreSQL through a worker process ...");
    const p = await persist(redis, sql, databaseUrl, loadConfig().amqpUrl);
    console.log("\nPersistence into PostgreSQL (worker process, batches of up to 1,000):");
    console.table([{
      "drained likes": p.drainedLikes,
      "persisted likes/s": p.persistedPerSecond,
      "transactions per 1,000": p.transactionsPer1000,
      [`lag p50 ms at ${p.pacedRate}/s`]: p.lagP50Ms,
      [`lag p99 ms at ${p.pacedRate}/s`]: p.lagP99Ms,
    }]);
  }
  if (chosen.has("reconcile")) {
    console.error("reconcile: 1,000,000 likes over 10,000 posts ...");
    if (!chosen.has("feed100") && !chosen.has("like-hot") && !chosen.has("like-spread")) await seed(sql, redis.client, likers, 10_000);
    const r = await reconcileScenario(redis, sql, databaseUrl, loadConfig().amqpUrl);
    console.log("\nRebuild and reconcile, 1,000,000 likes over 10,000 posts (Zipf), every post held by Redis:");
    console.table([{
      likes: r.likes,
      "rebuild 10,000 likers (ms)": r.rebuild10kLikersMs,
      "rebuild all posts (s)": r.rebuildAllSeconds,
      "reconcile pass (s)": r.reconcileSeconds,
      "targets/s": r.reconcileTargetsPerSecond,
      "reconcile peak RSS (MB)": r.reconcilePeakRssMb,
    }]);
    console.log(r.summary);
  }
  if (chosen.has("memory")) {
    console.error("memory: 1,000,000 likes over 10,000 posts (Zipf) ...");
    const m = await memory(redis);
    console.log("\nRedis memory, 1,000,000 likes over 10,000 posts (Zipf, s = 1):");
    console.table([{
      "likes": m.likes,
      "bytes/like (membership)": m.bytesPerLike,
      "bytes/counter hash": m.bytesPerCounterHash,
      "bytes/new counter hash": m.bytesPerNewCounterHash,
      "membership keys": m.membershipKeys,
      "largest key (members)": m.largestKeyMembers,
      "hottest post (likes)": m.hottestTargetLikes,
    }]);
  }
} finally {
  await sql.end();
  await redis.stop();
}
