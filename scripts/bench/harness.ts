// What every benchmark run needs: a private Redis (so round trips and memory
// are the benchmark's alone), its own database, seeded users and posts, and the
// service started as a separate process, as in production.
import { spawn, type ChildProcess } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { createTokenService } from "../../src/domain/identity.js";
import { Redis } from "ioredis";
import { createRedisClient, type RedisClient } from "../../src/stores/redis/client.js";
import { createCounterStore } from "../../src/stores/redis/counter-store.js";
import { createRedisKeys } from "../../src/stores/redis/keys.js";
import { migrate } from "../lib/migrate.js";
import { projectRoot } from "../lib/schema-engine.js";
import { freePort } from "../lib/ports.js";

export const benchSecret = "bench-secret-not-for-production-use";
export const partitions = 1024;


async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await sleep(100);
  }
  throw new Error(`${what} did not come up within ${timeoutMs / 1000} s`);
}

export interface PrivateRedis {
  readonly port: number;
  readonly url: string;
  readonly client: Redis;
  readsProcessed(): Promise<number>;
  stop(): Promise<void>;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction"],
    { stdio: "ignore" },
  );
  const url = `redis://127.0.0.1:${port}`;
  const client = createRedisClient({ url });
  if (!(client instanceof Redis)) throw new Error("expected a standalone Redis client");
  // Refused connections while the server starts are expected; waitFor retries them.
  client.on("error", () => {});
  await waitFor(async () => {
    await client.connect().catch(() => undefined);
    return (await client.ping()) === "PONG";
  }, "private Redis");
  return {
    port,
    url,
    client,
    async readsProcessed() {
      return Number(/total_reads_processed:(\d+)/.exec(await client.info("stats"))?.[1]);
    },
    async stop() {
      client.disconnect();
      child.kill("SIGTERM");
    },
  };
}

export async function prepareDatabase(url: string): Promise<pg.Client> {
  await migrate(url);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

export interface Seed {
  readonly userIds: bigint[];
  readonly postIds: bigint[];
  readonly tokens: string[];
}

/**
 * Inserts users and posts with plain SQL (seeding is not what is measured) and
 * gives each its counter hash in Redis, as registration and createPost do.
 */
export async function seed(sql: pg.Client, redis: RedisClient, users: number, posts: number): Promise<Seed> {
  await sql.query("TRUNCATE users, posts, comments, likes, counters RESTART IDENTITY");
  await sql.query(
    `INSERT INTO users (username, email, password_hash)
     SELECT 'bench_' || g, 'bench_' || g || '@example.com', 'scrypt$00$00' FROM generate_series(1, $1) g`,
    [users],
  );
  await sql.query(
    `INSERT INTO posts (author_id, title, body)
     SELECT 1 + (g % $1), 'Post ' || g, 'Body of post ' || g FROM generate_series(1, $2) g`,
    [users, posts],
  );
  const userIds = Array.from({ length: users }, (_, i) => BigInt(i + 1));
  const postIds = Array.from({ length: posts }, (_, i) => BigInt(i + 1));
  const counters = createCounterStore(redis, createRedisKeys(partitions));
  for (let i = 0; i < postIds.length; i += 1_000) {
    await Promise.all(postIds.slice(i, i + 1_000).map((id) => counters.init({ type: "post", id }, { like: 0 }, 1n + (id % BigInt(users)))));
  }
  for (let i = 0; i < userIds.length; i += 1_000) {
    await Promise.all(userIds.slice(i, i + 1_000).map((id) => counters.init({ type: "user", id }, { followers: 0 })));
  }
  const tokenService = createTokenService({ secret: benchSecret, ttlSeconds: 3600 });
  const tokens = await Promise.all(userIds.map((id) => tokenService.issue(id)));
  return { userIds, postIds, tokens };
}

export interface RunningServer {
  readonly url: string;
  stop(): Promise<void>;
}

export async function startServer(env: Record<string, string>): Promise<RunningServer> {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", "src/server.ts"], {
    cwd: projectRoot,
    env: {
      ...process.env,
      // The API alone by default (persistence is measured by the persist scenario, in a worker);
      // BENCH_PIPELINE=embedded measures it with the pipeline in the same process, as npm start runs it.
      PIPELINE: process.env.BENCH_PIPELINE ?? "off",
      RABBITMQ_PREFIX: "likes_bench",
      METRICS_PORT: "0",
      ...env,
      PORT: String(port),
      LOG_LEVEL: "warn",
      NODE_ENV: "production",
      JWT_SECRET: benchSecret,
    },
    stdio: ["ignore", "inherit", "inherit"],
  });
  const url = `http://127.0.0.1:${port}/graphql`;
  await waitFor(async () => (await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: '{"query":"{__typename}"}' })).ok, "the service");
  return {
    url,
    async stop() {
      child.kill("SIGTERM");
      await new Promise((resolve) => child.once("exit", resolve));
    },
  };
}
