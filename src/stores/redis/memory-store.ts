// Redis's memory, as the service's memory policy sees it (domain/memory-policy.ts):
// how full it is, and which targets it holds that were used least recently (use-records.ts).
import { Cluster, type Redis } from "ioredis";
import type { Target } from "../../domain/model/index.js";
import type { MemoryReading, MemoryStore } from "../../domain/ports/index.js";
import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";
import { keepsUseRecord, useScore } from "./use-records.js";

const field = (info: string, name: string): string | undefined => new RegExp(`^${name}:(.*?)\\r?$`, "m").exec(info)?.[1];

/** INFO memory's text as a reading. */
export function parseMemoryInfo(info: string): MemoryReading {
  return {
    usedBytes: Number(field(info, "used_memory") ?? 0),
    maxBytes: Number(field(info, "maxmemory") ?? 0),
    policy: field(info, "maxmemory_policy") ?? "unknown",
  };
}

const fullness = (r: MemoryReading) => (r.maxBytes > 0 ? r.usedBytes / r.maxBytes : 0);

/** The coldest targets looked at per partition, from the start of its uses set. */
const perPartition = 8;

export function createMemoryStore(redis: RedisClient, keys: RedisKeys): MemoryStore {
  const masters = (): Redis[] => (redis instanceof Cluster ? redis.nodes("master") : [redis]);
  // Where the walk of the partitions' use records goes on, and the SCAN over member indexes.
  let partition = 0;
  let indexCursor = "0";

  return {
    async read() {
      const readings = await Promise.all(masters().map(async (m) => parseMemoryInfo(await m.info("memory"))));
      return readings.reduce((worst, r) => (fullness(r) > fullness(worst) ? r : worst));
    },
    async coldest(sample, count) {
      // Each partition's least recently used targets, for enough partitions to look at about `sample`.
      const partitions = Math.min(keys.partitions, Math.max(1, Math.ceil(sample / perPartition)));
      const from = partition;
      partition = (partition + partitions) % keys.partitions;
      const replies = await Promise.all(
        Array.from({ length: partitions }, (_, i) => redis.zrange(keys.usesOf((from + i) % keys.partitions), "0", String(perPartition - 1), "WITHSCORES")),
      );
      const found: [Target, number][] = [];
      const stray: Promise<number>[] = [];
      replies.forEach((reply, p) => {
        for (let i = 0; i + 1 < reply.length; i += 2) {
          const target = keys.parseUse(reply[i] as string);
          if (target && keepsUseRecord(target)) found.push([target, Number(reply[i + 1])]);
          // A record no target should have (a user's, from an earlier version) would stay at the front for good.
          else stray.push(redis.zrem(keys.usesOf((from + p) % keys.partitions), reply[i] as string));
        }
      });
      await Promise.all(stray);
      return found
        .sort((a, b) => a[1] - b[1])
        .slice(0, count)
        .map(([target]) => target);
    },
    async passOver(targets) {
      const now = useScore();
      await Promise.all(targets.filter(keepsUseRecord).map((target) => redis.zadd(keys.use(target).key, "XX", "GT", now, keys.use(target).member)));
    },
    async reclaimIndexes(sample, count, idleSeconds) {
      // Member indexes are kept by a standalone Redis only.
      if (redis instanceof Cluster) return 0;
      const [next, found] = await redis.scan(indexCursor, "MATCH", keys.memberIndexPattern, "COUNT", sample);
      indexCursor = next;
      // OBJECT IDLETIME reads the key's clock without resetting it; only reads and likes use an index.
      const idle = await Promise.all(found.map((key) => redis.object("IDLETIME", key).then(Number, () => 0)));
      const idlest = found
        .map((key, i): [string, number] => [key, idle[i] ?? 0])
        .filter(([, seconds]) => seconds >= idleSeconds)
        .sort((a, b) => b[1] - a[1])
        .slice(0, count)
        .map(([key]) => key);
      return idlest.length === 0 ? 0 : redis.del(...idlest);
    },
  };
}
