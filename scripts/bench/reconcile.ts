// The reconcile scenario: 1,000,000 likes over 10,000 posts (Zipf) in PostgreSQL,
// every post rebuilt into Redis from them (timing the rebuilds), then a full
// reconcile pass as its own process (npm run reconcile), timed with its peak memory.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import type pg from "pg";
import { loadConfig } from "../../src/config.js";
import type { LikeableTarget as Target } from "../../src/domain/model/index.js";
import { compose } from "../../src/compose.js";
import { createLogger } from "../../src/process/logger.js";
import { createDatabase } from "../../src/stores/postgres/database.js";
import { projectRoot } from "../../src/stores/postgres/schema-engine.js";
import { entryArgs } from "../lib/entries.js";
import type { PrivateRedis } from "./private-redis.js";

export interface ReconcileFigures {
  readonly likes: number;
  readonly targets: number;
  readonly rebuildAllSeconds: number;
  readonly rebuild10kLikersMs: number;
  readonly reconcileSeconds: number;
  readonly reconcileTargetsPerSecond: number;
  readonly reconcilePeakRssMb: number;
  readonly summary: string;
}

/** Peak resident memory of a process, from /proc, sampled until it exits. */
export function peakRss(pid: number, exited: Promise<unknown>): Promise<number> {
  let peak = 0;
  const sample = () => {
    try {
      const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
      peak = Math.max(peak, kb);
    } catch {
      // Gone.
    }
  };
  const timer = setInterval(sample, 50);
  return exited.then(() => {
    clearInterval(timer);
    return peak / 1024;
  });
}

export async function reconcileScenario(redis: PrivateRedis, sql: pg.Client, databaseUrl: string, amqpUrl: string): Promise<ReconcileFigures> {
  await redis.client.flushall();
  await sql.query("TRUNCATE likes, collects, follows, relation_versions, view_totals, target_epochs, counters");
  // The posts themselves, without which a rebuild finds no target and loads nothing.
  await sql.query(
    `INSERT INTO posts (id, author_id, title, body) SELECT p, 1 + p % 1000, 'post ' || p, '' FROM generate_series(1, 10000) p ON CONFLICT DO NOTHING`,
  );
  // Posts 1 and 2 get exactly 10,000 likers; the rest follow 1/k.
  await sql.query(`
    INSERT INTO likes (target_type, target_id, user_id)
    SELECT 'post', p, u FROM generate_series(1, 10000) p,
      LATERAL generate_series(1, CASE WHEN p <= 2 THEN 10000 ELSE GREATEST(10, (120000 / p)::int) END) u`);
  await sql.query(`INSERT INTO counters (target_type, target_id, name, value) SELECT target_type, target_id, 'like', count(*) FROM likes GROUP BY 1, 2`);
  await sql.query(
    `INSERT INTO relation_versions (target_type, target_id, relation, user_id, version, member) SELECT target_type, target_id, 'like', min(user_id), 1, true FROM likes GROUP BY 1, 2`,
  );
  const likes = Number((await sql.query<{ n: string }>("SELECT count(*) AS n FROM likes")).rows[0]?.n);

  const posts: Target[] = Array.from({ length: 10_000 }, (_, i) => ({ type: "post", id: BigInt(i + 1) }));
  const rebuilt = await rebuildPosts(redis, databaseUrl, posts, "reconcile");
  const pass = await reconcilePass(redis, databaseUrl, amqpUrl, "reconcile");
  return {
    likes,
    targets: posts.length,
    rebuildAllSeconds: rebuilt.allSeconds,
    rebuild10kLikersMs: rebuilt.firstMs,
    reconcileSeconds: pass.seconds,
    reconcileTargetsPerSecond: pass.targetsPerSecond,
    reconcilePeakRssMb: pass.peakRssMb,
    summary: pass.summary,
  };
}

/**
 * Rebuilds every post into Redis from PostgreSQL, 16 at a time: `posts[0]` first alone to warm
 * connections and query plans, then `posts[1]` alone, timed (`firstMs`), then the rest (`allSeconds`).
 */
export async function rebuildPosts(redis: PrivateRedis, databaseUrl: string, posts: readonly Target[], label: string) {
  const config = loadConfig({ ...process.env, DATABASE_URL: databaseUrl, REDIS_URL: redis.url });
  const db = createDatabase({ url: databaseUrl, poolSize: 8 });
  const services = compose(config, { db, redis: redis.client }, createLogger("warn", "bench")).services;
  try {
    await services.counters.rebuild(posts[0] as Target);
    const single = Date.now();
    await services.counters.rebuild(posts[1] as Target);
    const firstMs = Date.now() - single;
    process.stderr.write(`  ${label}: rebuilding ${posts.length.toLocaleString()} posts from PostgreSQL ...\n`);
    const all = Date.now();
    for (let i = 2; i < posts.length; i += 16) {
      await Promise.all(posts.slice(i, i + 16).map((p) => services.counters.rebuild(p)));
      if (i % 50_000 === 2 && i > 2) process.stderr.write(`  ${label}: ${i.toLocaleString()} rebuilt in ${((Date.now() - all) / 1000).toFixed(0)} s\n`);
    }
    return { firstMs, allSeconds: (Date.now() - all) / 1000 };
  } finally {
    await db.$disconnect();
  }
}

/** A full reconcile pass as its own process, with the command line of npm run reconcile, timed with its peak memory. */
export async function reconcilePass(redis: PrivateRedis, databaseUrl: string, amqpUrl: string, label: string) {
  process.stderr.write(`  ${label}: full pass (npm run reconcile) ...\n`);
  const child = spawn(process.execPath, ["--max-old-space-size=160", ...entryArgs("reconcile")], {
    cwd: projectRoot,
    env: { ...process.env, DATABASE_URL: databaseUrl, REDIS_URL: redis.url, AMQP_URL: amqpUrl, RABBITMQ_PREFIX: "likes_bench", COLD_TARGET_IDLE_SECONDS: "0" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const started = Date.now();
  const peak = await peakRss(child.pid as number, exited);
  const seconds = (Date.now() - started) / 1000;
  const checked = Number(/targets checked\s+(\d+)/.exec(output)?.[1] ?? 0);
  return {
    seconds,
    checked,
    targetsPerSecond: Math.round(checked / seconds),
    peakRssMb: Math.round(peak),
    summary: output.trim().split("\n").slice(-9).join("\n"),
  };
}
