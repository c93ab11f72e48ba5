// Redis memory of the data set once warmed: bytes per like in membership shards,
// bytes per counter hash, and the largest key (the bound is 10,000 members).
import { createRedisKeys } from "../../src/stores/redis/keys.js";
import type { Dataset } from "./dataset.js";
import { partitions } from "./harness.js";
import type { PrivateRedis } from "./private-redis.js";

export interface MemoryFigures {
  readonly likes: number;
  readonly targets: number;
  readonly bytesPerLike: number;
  readonly bytesPerCounterHash: number;
  readonly membershipKeys: number;
  readonly largestKeyMembers: number;
  readonly usedMemoryMb: number;
}

const usedMemory = (info: string) => Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);

export async function measureMemory(redis: PrivateRedis, data: Dataset, infoBeforeWarm: string): Promise<MemoryFigures> {
  const client = redis.client;
  const keys = createRedisKeys(partitions);
  let hashBytes = 0;
  for (let i = 0; i < data.postIds.length; i += 1_000) {
    const pipeline = client.pipeline();
    for (const id of data.postIds.slice(i, i + 1_000)) pipeline.memory("USAGE", keys.counters({ type: "post", id }));
    hashBytes += ((await pipeline.exec()) ?? []).reduce((sum, [, n]) => sum + Number(n ?? 0), 0);
  }
  let membershipKeys = 0;
  let membershipBytes = 0;
  let largest = 0;
  for await (const found of client.scanStream({ match: "lk:*", count: 1_000 })) {
    const batch = found as string[];
    if (batch.length === 0) continue;
    membershipKeys += batch.length;
    const pipeline = client.pipeline();
    for (const key of batch) pipeline.scard(key).memory("USAGE", key);
    const replies = ((await pipeline.exec()) ?? []).map(([, n]) => Number(n ?? 0));
    for (let i = 0; i < replies.length; i += 2) {
      largest = Math.max(largest, replies[i] as number);
      membershipBytes += replies[i + 1] as number;
    }
  }
  const used = usedMemory(await client.info("memory"));
  return {
    likes: data.likes,
    targets: data.postIds.length + data.likerIds.length,
    bytesPerLike: Number((membershipBytes / data.likes).toFixed(2)),
    bytesPerCounterHash: Math.round(hashBytes / data.postIds.length),
    membershipKeys,
    largestKeyMembers: largest,
    usedMemoryMb: Math.round((used - usedMemory(infoBeforeWarm)) / 1e5) / 10,
  };
}
