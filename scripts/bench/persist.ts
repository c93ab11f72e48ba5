// The persist scenario: changes (likes here) from the Redis outbox into PostgreSQL through
// RabbitMQ, with the pipeline in a worker process of its own (npm run worker).
import { spawn } from "node:child_process";
import { once } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import type pg from "pg";
import type { Target } from "../../src/domain/model/index.js";
import { createCounterStore } from "../../src/stores/redis/counter-store.js";
import { createRedisKeys } from "../../src/stores/redis/keys.js";
import { createMembershipStore } from "../../src/stores/redis/membership-store.js";
import { projectRoot } from "../../src/stores/postgres/schema-engine.js";
import { freePort } from "../lib/ports.js";
import { entryArgs } from "../lib/entries.js";
import { partitions } from "./harness.js";
import type { PrivateRedis } from "./private-redis.js";

export interface PersistFigures {
  readonly drainedLikes: number;
  readonly persistedPerSecond: number;
  readonly transactionsPer1000: number;
  readonly pacedRate: number;
  readonly lagP50Ms: number;
  readonly lagP99Ms: number;
}

async function startWorker(env: Record<string, string>) {
  const metricsPort = await freePort();
  const child = spawn(process.execPath, entryArgs("worker"), {
    cwd: projectRoot,
    env: { ...process.env, ...env, METRICS_PORT: String(metricsPort), LOG_LEVEL: "warn" },
    stdio: ["ignore", "inherit", "inherit"],
  });
  const metric = async (name: string) => {
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    return Number(new RegExp(`^${name} (\\d+)`, "m").exec(text)?.[1] ?? 0);
  };
  for (let i = 0; i < 100; i++) {
    if (
      await metric("likes_events_persisted_total").then(
        () => true,
        () => false,
      )
    )
      break;
    await sleep(100);
  }
  return {
    metric,
    async stop() {
      child.kill("SIGTERM");
      await once(child, "exit");
    },
  };
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;

/** Users `from + 1` to `from + count` (numbered above the run's base) like the thousand posts in turn. */
type LikeWriter = (from: number, count: number) => Promise<unknown>;

async function likeWriter(redis: PrivateRedis, userBase: number): Promise<LikeWriter> {
  const keys = createRedisKeys(partitions);
  const counters = createCounterStore(redis.client, keys);
  const memberships = createMembershipStore(redis.client, keys);
  const posts: Target[] = Array.from({ length: 1_000 }, (_, i) => ({ type: "post", id: BigInt(i + 1) }));
  await Promise.all(posts.map((t) => counters.init(t, { like: 0 }, 1n)));
  // Thousands of likes sent at once on a busy machine: a deadline a minute away, so none is refused for waiting its turn.
  return (from, count) =>
    Promise.all(
      Array.from({ length: count }, (_, i) =>
        memberships.add("like", posts[(from + i) % posts.length] as Target, BigInt(userBase + from + i + 1), Date.now() + 60_000),
      ),
    );
}

/** Paced likes after the drain, by the users numbered above `drained`, and the lag of each to its row. */
async function measureLag(sql: pg.Client, write: LikeWriter, userBase: number, drained: number): Promise<{ pacedRate: number; lags: number[] }> {
  // Lag: 5,000 likes a second for ten seconds, each timed from its acknowledgement to its row.
  const pacedRate = 5_000;
  const ackedAt = new Map<number, number>();
  let nextUser = drained;
  const lags: number[] = [];
  let seenUpTo = drained;
  let writing = true;
  const poller = (async () => {
    while (writing || lags.length < ackedAt.size) {
      const { rows: fresh } = await sql.query("SELECT user_id FROM likes WHERE user_id > $1", [userBase + seenUpTo]);
      const now = Date.now();
      for (const { user_id } of fresh as { user_id: string }[]) {
        const user = Number(user_id) - userBase;
        const at = ackedAt.get(user);
        if (at !== undefined) lags.push(now - at);
        seenUpTo = Math.max(seenUpTo, user);
      }
      await sleep(25);
    }
  })();
  const tickMs = 50;
  const perTick = (pacedRate * tickMs) / 1000;
  const pacedStart = Date.now();
  for (let tick = 0; tick < 10_000 / tickMs; tick++) {
    const from = nextUser;
    nextUser += perTick;
    void write(from, perTick).then(() => {
      const now = Date.now();
      for (let u = from + 1; u <= from + perTick; u++) ackedAt.set(u, now);
    });
    await sleep(Math.max(0, pacedStart + (tick + 1) * tickMs - Date.now()));
  }
  writing = false;
  await Promise.race([poller, sleep(30_000)]);
  return { pacedRate, lags };
}

/**
 * `keepRows`: persist beside the rows the database holds (likes-20m's), by users numbered
 * above all of theirs, rather than into emptied tables.
 */
export async function persist(redis: PrivateRedis, sql: pg.Client, databaseUrl: string, amqpUrl: string, keepRows = false): Promise<PersistFigures> {
  const env = { DATABASE_URL: databaseUrl, REDIS_URL: redis.url, AMQP_URL: amqpUrl, RABBITMQ_PREFIX: "likes_bench_persist" };

  await redis.client.flushall();
  if (!keepRows) await sql.query("TRUNCATE likes, collects, follows, relation_versions, view_totals, target_epochs, counters");
  const userBase = keepRows ? 1_000_000_000 : 0;
  const write = await likeWriter(redis, userBase);
  // Beside kept rows, only this run's, through the users' index (a count of 20,000,000 rows would take seconds).
  const rows = async () =>
    Number(
      (keepRows
        ? await sql.query<{ n: string }>("SELECT count(*) AS n FROM likes WHERE user_id > $1", [userBase])
        : await sql.query<{ n: string }>("SELECT count(*) AS n FROM likes")
      ).rows[0]?.n,
    );

  // Drain: 200,000 changes wait in the outbox, then the worker starts and takes them all.
  const drained = 200_000;
  process.stderr.write("  persist: filling the outbox with 200,000 likes ...\n");
  for (let i = 0; i < drained; i += 5_000) await write(i, 5_000);
  const worker = await startWorker(env);
  let figures: PersistFigures;
  try {
    const started = Date.now();
    const committedBefore = await worker.metric("likes_persist_batches_total");
    while ((await rows()) < drained) {
      if (Date.now() - started > 300_000) throw new Error("the outbox did not drain within 5 minutes");
      await sleep(200);
    }
    const seconds = (Date.now() - started) / 1000;
    const transactions = (await worker.metric("likes_persist_batches_total")) - committedBefore;

    const { pacedRate, lags } = await measureLag(sql, write, userBase, drained);
    lags.sort((a, b) => a - b);
    figures = {
      drainedLikes: drained,
      persistedPerSecond: Math.round(drained / seconds),
      transactionsPer1000: Number(((transactions / drained) * 1000).toFixed(2)),
      pacedRate,
      lagP50Ms: percentile(lags, 50),
      lagP99Ms: percentile(lags, 99),
    };
  } finally {
    await worker.stop();
  }
  return figures;
}
