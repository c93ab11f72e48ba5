import { execFileSync } from "node:child_process";
import autocannon from "autocannon";
import type { LikeableTarget as Target } from "../../src/domain/model.js";
import type { Redis } from "ioredis";
import { createCounterStore } from "../../src/stores/redis/counter-store.js";
import { createRedisKeys, membershipGenerations } from "../../src/stores/redis/keys.js";
import { createLikeStore } from "../../src/stores/redis/like-store.js";
import { loadScript } from "../../src/stores/redis/scripts.js";
import { partitions, type PrivateRedis, type Seed } from "./harness.js";

export const connections = 64;

export interface HttpFigures {
  readonly scenario: string;
  readonly requests: number;
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly redisRoundTripsPerRequest: number;
  readonly failures: number;
  readonly note: string;
}

interface LoadOptions {
  readonly scenario: string;
  readonly url: string;
  readonly redis: PrivateRedis;
  /** Request body and bearer token of the n-th request. */
  readonly request: (n: number) => { body: string; token: string };
  readonly amount?: number;
  readonly durationSeconds?: number;
}

async function load(options: LoadOptions): Promise<Omit<HttpFigures, "note">> {
  let next = 0;
  let failures = 0;
  const readsBefore = await options.redis.readsProcessed();
  const result = await autocannon({
    url: options.url,
    connections,
    ...(options.amount ? { amount: options.amount } : { duration: options.durationSeconds ?? 10 }),
    requests: [
      {
        method: "POST",
        setupRequest: (req) => {
          const { body, token } = options.request(next++);
          return { ...req, body, headers: { "content-type": "application/json", authorization: `Bearer ${token}` } };
        },
        onResponse: (status, body) => {
          if (status !== 200 || body.includes('"errors"')) failures++;
        },
      },
    ],
  });
  const readsAfter = await options.redis.readsProcessed();
  const requests = result.requests.total;
  return {
    scenario: options.scenario,
    requests,
    requestsPerSecond: Math.round(requests / result.duration),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    redisRoundTripsPerRequest: Number(((readsAfter - readsBefore - 1) / Math.max(1, requests)).toFixed(2)),
    failures: failures + result.errors + result.timeouts,
  };
}

const feedQuery = `query($ids: [ID!]!) { posts(ids: $ids) { id title counts { likes reads comments collects } viewerHasLiked } }`;

export async function feed100(url: string, redis: PrivateRedis, seed: Seed): Promise<HttpFigures> {
  // 50 different pages of 100 random posts, each asked by many viewers.
  const pages = Array.from({ length: 50 }, () =>
    JSON.stringify({
      query: feedQuery,
      variables: { ids: Array.from({ length: 100 }, () => String(seed.postIds[Math.floor(Math.random() * seed.postIds.length)])) },
    }),
  );
  const viewers = seed.tokens.slice(0, 1_000);
  // Warm-up: the first sight of a post row costs SQL; steady state serves rows from the process cache.
  await load({ scenario: "warm-up", url, redis, request: (n) => ({ body: pages[n % pages.length] as string, token: viewers[0] as string }), amount: 500 });
  const figures = await load({
    scenario: "feed100",
    url,
    redis,
    durationSeconds: 10,
    request: (n) => ({ body: pages[n % pages.length] as string, token: viewers[n % viewers.length] as string }),
  });
  return { ...figures, note: "posts(ids) of 100 posts: title, 4 counts, viewerHasLiked" };
}

const likeMutation = `mutation($id: ID!) { likePost(postId: $id) { changed post { counts { likes } viewerHasLiked } } }`;
const likeBody = (postId: bigint) => JSON.stringify({ query: likeMutation, variables: { id: String(postId) } });

export async function likeHot(url: string, redis: PrivateRedis, seed: Seed, likers: number): Promise<HttpFigures> {
  const hot = seed.postIds[0] as bigint;
  const body = likeBody(hot);
  const figures = await load({ scenario: "like-hot", url, redis, amount: likers, request: (n) => ({ body, token: seed.tokens[n] as string }) });
  const counted = Number(await redis.client.hget(createRedisKeys(partitions).counters({ type: "post", id: hot }), "like"));
  const exact = counted === figures.requests - figures.failures;
  return { ...figures, note: `${likers} distinct users on one post; count ${counted} ${exact ? "= acknowledged (exact)" : "!= acknowledged (NOT EXACT)"}` };
}

/** Shows every post once through posts(ids), as a feed would before anyone likes them. */
async function showAllPosts(url: string, seed: Seed): Promise<void> {
  for (let i = 0; i < seed.postIds.length; i += 100) {
    const ids = seed.postIds.slice(i, i + 100).map(String);
    await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ query: "query($ids: [ID!]!) { posts(ids: $ids) { id } }", variables: { ids } }) });
  }
}

export async function likeSpread(url: string, redis: PrivateRedis, seed: Seed, likers: number): Promise<HttpFigures> {
  await showAllPosts(url, seed);
  const spread = seed.postIds.slice(1);
  const postOf = (n: number) => spread[(n * 7_919) % spread.length] as bigint;
  const bodies = new Map<bigint, string>();
  const figures = await load({
    scenario: "like-spread",
    url,
    redis,
    amount: likers,
    request: (n) => {
      const post = postOf(n);
      let body = bodies.get(post);
      if (!body) bodies.set(post, (body = likeBody(post)));
      return { body, token: seed.tokens[n] as string };
    },
  });
  const keys = createRedisKeys(partitions);
  const counts = await Promise.all(spread.map((id) => redis.client.hget(keys.counters({ type: "post", id }), "like")));
  const total = counts.reduce((sum, c) => sum + Number(c ?? 0), 0);
  const exact = total === figures.requests - figures.failures;
  return { ...figures, note: `distinct (user, post) pairs over ${spread.length} posts already shown in a feed; sum ${total} ${exact ? "= acknowledged (exact)" : "!= acknowledged (NOT EXACT)"}` };
}

/** redis-benchmark running the like script itself by EVALSHA: the ceiling for like mutations here. */
export function rawLikeScript(redis: PrivateRedis): number {
  const cli = (...args: string[]) => execFileSync("redis-cli", ["-p", String(redis.port), ...args], { encoding: "utf8" }).trim();
  const sha = cli("SCRIPT", "LOAD", loadScript("like"));
  const target: Target = { type: "post", id: 999_999_999n };
  const keys = createRedisKeys(partitions);
  cli("HSET", keys.counters(target), "like", "0");
  // One shard key per generation, as the service sends; a large capacity keeps every call a real insert.
  const shardKeys = keys.memberShards(target, 1n);
  const output = execFileSync(
    "redis-benchmark",
    ["-p", String(redis.port), "-c", String(connections), "-n", "300000", "-r", "100000000", "-q",
      "EVALSHA", sha, String(3 + membershipGenerations), keys.counters(target), keys.outbox(target), keys.touched(target), ...shardKeys, "1__rand_int__", "1000000000", "like", "post", String(target.id)],
    { encoding: "utf8" },
  );
  const match = /([\d.]+) requests per second/.exec(output);
  if (!match?.[1]) throw new Error(`could not read redis-benchmark's output: ${output}`);
  return Math.round(Number(match[1]));
}

export interface MemoryFigures {
  readonly targets: number;
  readonly likes: number;
  readonly bytesPerCounterHash: number;
  readonly bytesPerNewCounterHash: number;
  readonly bytesPerLike: number;
  readonly membershipKeys: number;
  readonly largestKeyMembers: number;
  readonly hottestTargetLikes: number;
}

async function usedMemory(client: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await client.info("memory"))?.[1]);
}

/** 1,000,000 likes over 10,000 posts, Zipf-distributed (s = 1), written through the like script. */
export async function memory(redis: PrivateRedis, targets = 10_000, likes = 1_000_000, userPool = 2_000_000): Promise<MemoryFigures> {
  const client = redis.client;
  await client.flushall();
  const keys = createRedisKeys(partitions);
  const counters = createCounterStore(client, keys);
  const store = createLikeStore(client, keys);
  const posts: Target[] = Array.from({ length: targets }, (_, i) => ({ type: "post", id: BigInt(i + 1) }));

  const base = await usedMemory(client);
  for (let i = 0; i < posts.length; i += 1_000) {
    await Promise.all(posts.slice(i, i + 1_000).map((t) => counters.init(t, { like: 0 }, 1n + (t.id % 100_000n))));
  }
  const afterHashes = await usedMemory(client);

  const harmonic = posts.reduce((sum, _, r) => sum + 1 / (r + 1), 0);
  const perPost = posts.map((_, r) => Math.max(1, Math.round((likes * (1 / (r + 1))) / harmonic)));
  let written = 0;
  const started = Date.now();
  for (const [r, target] of posts.entries()) {
    // Distinct users per post: a random start and a stride coprime to the pool.
    const n = perPost[r] as number;
    const start = Math.floor(Math.random() * userPool);
    for (let k = 0; k < n; k += 5_000) {
      const batch = Array.from({ length: Math.min(5_000, n - k) }, (_, j) => BigInt(1 + ((start + (k + j) * 7_919) % userPool)));
      await Promise.all(batch.map((u) => store.like(target, u)));
    }
    written += n;
    if (r % 1_000 === 0) process.stderr.write(`\r  memory: ${written.toLocaleString()} likes written (${Math.round(written / ((Date.now() - started) / 1000 + 1e-3))}/s)   `);
  }
  process.stderr.write("\n");
  // The relay deletes outbox entries once RabbitMQ confirmed them; none runs here, so drop them.
  await client.del(...keys.outboxes());
  const afterLikes = await usedMemory(client);
  // Counter hashes as they stand after their likes, version fields included.
  let hashBytes = 0;
  for (let i = 0; i < posts.length; i += 1_000) {
    const sizes = await Promise.all(posts.slice(i, i + 1_000).map((t) => client.memory("USAGE", keys.counters(t))));
    hashBytes += sizes.reduce<number>((sum, n) => sum + Number(n ?? 0), 0);
  }

  let membershipKeys = 0;
  let largest = 0;
  for await (const found of client.scanStream({ match: "lk:*", count: 1_000 })) {
    const batch = found as string[];
    membershipKeys += batch.length;
    const sizes = await Promise.all(batch.map((k) => client.scard(k)));
    largest = Math.max(largest, ...sizes);
  }
  return {
    targets,
    likes: written,
    bytesPerCounterHash: Math.round(hashBytes / targets),
    bytesPerNewCounterHash: Math.round((afterHashes - base) / targets),
    bytesPerLike: Number(((afterLikes - afterHashes) / written).toFixed(2)),
    membershipKeys,
    largestKeyMembers: largest,
    hottestTargetLikes: perPost[0] as number,
  };
}
