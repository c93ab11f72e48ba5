// Redis alone, driven by redis-benchmark: the ceilings the HTTP scenarios are compared with.
import { execFileSync } from "node:child_process";
import { counterNames, type Target } from "../../src/domain/model/index.js";
import { createRedisKeys, membershipGenerations } from "../../src/stores/redis/keys.js";
import { relationLayouts } from "../../src/stores/redis/relations.js";
import { loadScript } from "../../src/stores/redis/scripts.js";
import { partitions } from "./harness.js";
import { connections } from "./http-load.js";
import type { PrivateRedis } from "./private-redis.js";

const cli = (redis: PrivateRedis, ...args: string[]) => execFileSync("redis-cli", ["-p", String(redis.port), ...args], { encoding: "utf8" }).trim();

function redisBenchmark(redis: PrivateRedis, args: readonly string[]): number {
  const output = execFileSync("redis-benchmark", ["-p", String(redis.port), "-c", String(connections), "-q", ...args], { encoding: "utf8" });
  const match = /([\d.]+) requests per second/.exec(output);
  if (!match?.[1]) throw new Error(`could not read redis-benchmark's output: ${output}`);
  return Number(match[1]);
}

/** redis-benchmark running the like script itself by EVALSHA: the ceiling for like mutations here. */
export function rawLikeScript(redis: PrivateRedis): number {
  const sha = cli(redis, "SCRIPT", "LOAD", loadScript("add-member"));
  const target: Target = { type: "post", id: 999_999_999n };
  const keys = createRedisKeys(partitions);
  cli(redis, "HSET", keys.counters(target), "like", "0");
  // One shard key per generation, as the service sends; a large capacity keeps every call a real insert.
  const shardKeys = keys.memberShards("like", target, 1n);
  // A receipt per call, as the service sends (redis-benchmark fills in __rand_int__ per call).
  const receipt = `${keys.receipt(target)}__rand_int__`;
  const perSecond = redisBenchmark(redis, [
    "-n",
    "300000",
    "-r",
    "100000000",
    "EVALSHA",
    sha,
    String(4 + membershipGenerations),
    keys.counters(target),
    keys.outbox(target),
    keys.touched(target, "like"),
    receipt,
    ...shardKeys,
    "1__rand_int__",
    "1000000000",
    "like",
    "post",
    String(target.id),
    relationLayouts.like.tag,
    relationLayouts.like.generationField,
    ...counterNames.post,
  ]);
  cli(redis, "DEL", keys.counters(target), keys.outbox(target), keys.touched(target, "like"), ...shardKeys);
  return Math.round(perSecond);
}

/**
 * redis-benchmark reading counter hashes as the service's hashes stand, in
 * pipelines of 100 HGETALL: the ceiling of a feed of 100 posts read from Redis.
 * The hashes are copies of the first 10,000 posts' (redis-benchmark can only
 * name keys by a zero-padded random number).
 */
export async function rawFeedPipelines(redis: PrivateRedis, posts: readonly bigint[]): Promise<number> {
  const keys = createRedisKeys(partitions);
  const copies = posts.slice(0, 10_000).map((_, i) => `bench:cnt:${String(i).padStart(12, "0")}`);
  const copy = redis.client.pipeline();
  posts.slice(0, 10_000).forEach((id, i) => copy.copy(keys.counters({ type: "post", id }), copies[i] as string, "REPLACE"));
  await copy.exec();
  const perSecond = redisBenchmark(redis, ["-n", "2000000", "-P", "100", "-r", String(copies.length), "HGETALL", "bench:cnt:__rand_int__"]);
  await redis.client.del(...copies);
  return Math.round(perSecond / 100);
}
