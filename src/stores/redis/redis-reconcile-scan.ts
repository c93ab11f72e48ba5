// What every read of a reconcile pass in Redis shares: its client and keys, and a
// SCAN that walks every master of a cluster in turn.
import { Cluster, type Redis } from "ioredis";
import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";

/** The client and keys every function of a pass's reads takes. */
export interface ReconcileRedis {
  readonly redis: RedisClient;
  readonly keys: RedisKeys;
}

export const masters = (redis: RedisClient): Redis[] => (redis instanceof Cluster ? redis.nodes("master") : [redis]);

/** One SCAN over every master in turn; the cursor names the master node and that node's SCAN cursor. */
export async function scanNodes(
  redis: RedisClient,
  cursor: string | null,
  pattern: string,
  count: number,
): Promise<{ found: string[]; cursor: string | null }> {
  const [nodeText = "0", nodeCursor = "0"] = (cursor ?? "0:0").split(":");
  const nodes = masters(redis);
  const node = Number(nodeText);
  const [next, found] = await (nodes[node] as Redis).scan(nodeCursor, "MATCH", pattern, "COUNT", count);
  const done = next === "0";
  return { found, cursor: done ? (node + 1 < nodes.length ? `${node + 1}:0` : null) : `${node}:${next}` };
}
