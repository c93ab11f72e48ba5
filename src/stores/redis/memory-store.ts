// Redis's memory, as the service's memory policy sees it (domain/memory-policy.ts):
// how full it is, and which targets it holds that were used least recently.
import { Cluster, type Redis } from "ioredis";
import type { Target } from "../../domain/model/index.js";
import type { MemoryReading, MemoryStore } from "../../domain/ports/index.js";
import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";

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

export function createMemoryStore(redis: RedisClient, keys: RedisKeys): MemoryStore {
  const masters = (): Redis[] => (redis instanceof Cluster ? redis.nodes("master") : [redis]);
  // Where the walk for cold targets goes on: a node, and that node's SCAN cursor.
  let node = 0;
  let cursor = "0";

  return {
    async read() {
      const readings = await Promise.all(masters().map(async (m) => parseMemoryInfo(await m.info("memory"))));
      return readings.reduce((worst, r) => (fullness(r) > fullness(worst) ? r : worst));
    },
    async coldest(sample, count) {
      const nodes = masters();
      if (node >= nodes.length) [node, cursor] = [0, "0"];
      const on = nodes[node] as Redis;
      // SCAN answers a few keys at the end of a pass: the sample is filled from the next pass, or the coldest
      // few of a small sample would be taken, however recently used. A node holding fewer than `sample` is sampled
      // whole; on a cluster the next call samples the next node.
      const found = new Set<string>();
      for (let passes = 0; found.size < sample && passes < 2;) {
        const [next, keysFound] = await on.scan(cursor, "MATCH", keys.countersPattern, "COUNT", sample);
        for (const key of keysFound) found.add(key);
        cursor = next;
        if (next !== "0") continue;
        passes++;
        if (nodes.length > 1) {
          node++;
          break;
        }
      }
      // Users stay, as idle eviction leaves them: their counters are written from other slots (a like credits its author).
      const targets = [...found].flatMap((key) => {
        const target = keys.parseCounters(key);
        return target && target.type !== "user" ? [{ key, target }] : [];
      });
      // OBJECT IDLETIME reads the key's clock without resetting it (an HGETALL would).
      const idle = await Promise.all(targets.map(({ key }) => on.object("IDLETIME", key).then(Number, () => 0)));
      return targets
        .map(({ target }, i): [Target, number] => [target, idle[i] ?? 0])
        .sort((a, b) => b[1] - a[1])
        .slice(0, count)
        .map(([target]) => target);
    },
  };
}
