// The reconcile-big scenario: one post with 5,000,000 likers, in PostgreSQL and in
// Redis in the service's own shard layout (generation 5: 32,768 shards), with a
// little drift both ways, compared by a reconcile pass run as `npm run reconcile`
// runs it (node --max-old-space-size=160), timed with its peak heap and RSS.
// `memberChunk` above the target's size makes the pass load it whole, as every
// pass did before big targets were walked in pieces.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type pg from "pg";
import { createRedisKeys, epochField, generationField, membershipFanout, versionField } from "../../src/stores/redis/keys.js";
import { projectRoot } from "../../src/stores/postgres/schema-engine.js";
import { entryArgs } from "../lib/entries.js";
import { partitions } from "./harness.js";
import type { PrivateRedis } from "./private-redis.js";
import { peakRss } from "./reconcile.js";

export interface ReconcileBigFigures {
  readonly likers: number;
  readonly loadSeconds: number;
  readonly passSeconds: number;
  readonly peakHeapMb: number;
  readonly peakRssMb: number;
  readonly exitCode: number | null;
  readonly summary: string;
}

const likers = 5_000_000;
/** The generation a rebuild gives 5,000,000 members at 512 a shard (src/stores/redis/rebuild-write.ts). */
const generation = 5;
const drift = 1_000;
const target = { type: "post" as const, id: 1n };

/** Loads the data once; passes then run over it as they like. */
export async function loadBigTarget(redis: PrivateRedis, sql: pg.Client): Promise<number> {
  const started = Date.now();
  await redis.client.flushall();
  await sql.query("TRUNCATE likes, collects, follows, relation_versions, view_totals, target_epochs, counters");
  // Users 1..5,000,000; PostgreSQL misses the first `drift` and holds `drift` strays above them.
  await sql.query(`INSERT INTO likes (target_type, target_id, user_id)
    SELECT 'post', 1, u FROM generate_series(${drift + 1}, ${likers + drift}) u`);
  await sql.query(`INSERT INTO counters (target_type, target_id, name, value) VALUES ('post', 1, 'like', ${likers})`);
  // Rebuilt once (epoch 1) with no change since: both stores at version 1 * 10^16, quiescent.
  await sql.query(`INSERT INTO target_epochs (target_type, target_id, epoch) VALUES ('post', 1, 1)`);
  const keys = createRedisKeys(partitions);
  const shards = membershipFanout ** generation;
  for (let from = 1; from <= likers; from += 250_000) {
    const byShard = new Map<string, string[]>();
    for (let u = from; u < Math.min(from + 250_000, likers + 1); u++) {
      const key = keys.memberShard("like", target, BigInt(u), generation);
      let list = byShard.get(key);
      if (!list) byShard.set(key, (list = []));
      list.push(String(u));
    }
    const pipeline = redis.client.pipeline();
    for (const [key, members] of byShard) pipeline.sadd(key, ...members);
    await pipeline.exec();
    process.stderr.write(`\r  reconcile-big: ${Math.min(from + 249_999, likers).toLocaleString()} members in Redis (${shards} shards)`);
  }
  process.stderr.write("\n");
  await redis.client.hset(keys.counters(target), "like", likers, generationField, generation, epochField, 1, versionField, 0);
  return (Date.now() - started) / 1000;
}

/** Peak heap of the pass, written by a preload the child imports (heapUsed sampled every 20 ms). */
function heapProbe(): { file: string; preload: string } {
  const file = path.join(tmpdir(), `reconcile-big-heap-${process.pid}.txt`);
  const preload = path.join(tmpdir(), `reconcile-big-probe-${process.pid}.mjs`);
  writeFileSync(
    preload,
    `import { writeFileSync } from "node:fs";
let peak = 0;
const sample = () => (peak = Math.max(peak, process.memoryUsage().heapUsed));
setInterval(sample, 20).unref();
process.on("exit", () => { sample(); writeFileSync(${JSON.stringify(file)}, String(peak)); });
`,
  );
  return { file, preload };
}

export async function reconcileBigPass(
  redis: PrivateRedis,
  databaseUrl: string,
  amqpUrl: string,
  memberChunk: number,
): Promise<Omit<ReconcileBigFigures, "loadSeconds">> {
  const probe = heapProbe();
  writeFileSync(probe.file, "0");
  const child = spawn(process.execPath, ["--max-old-space-size=160", "--import", probe.preload, ...entryArgs("reconcile")], {
    cwd: projectRoot,
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      REDIS_URL: redis.url,
      AMQP_URL: amqpUrl,
      RABBITMQ_PREFIX: "likes_bench",
      COLD_TARGET_IDLE_SECONDS: "0",
      RECONCILE_MEMBER_CHUNK: String(memberChunk),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  let errors = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (errors = (errors + chunk.toString()).slice(-4000)));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const started = Date.now();
  const peakRssMb = await peakRss(child.pid as number, exited);
  const exitCode = await exited;
  const passSeconds = (Date.now() - started) / 1000;
  // A process killed by the heap limit never writes its figure.
  const peakHeapMb = exitCode === 0 ? Number(readFileSync(probe.file, "utf8")) / 2 ** 20 : Number.NaN;
  const crashed = /heap out of memory|FATAL ERROR[^\n]*/.exec(errors)?.[0];
  return {
    likers,
    passSeconds,
    peakHeapMb: Math.round(peakHeapMb),
    peakRssMb: Math.round(peakRssMb),
    exitCode,
    summary:
      exitCode === 0 ? output.trim().split("\n").slice(-14).join("\n") : `exit ${exitCode}: ${crashed ?? errors.trim().split("\n").slice(-3).join(" | ")}`,
  };
}
