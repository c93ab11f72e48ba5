// What the reconcile job reads from Redis: counter hashes found by SCAN (never
// KEYS), each with its members, and the one repair it makes here.
import { Cluster, type Redis } from "ioredis";
import type { CachedTarget } from "../../domain/reconcile.js";
import type { Target } from "../../domain/targets.js";
import type { RedisClient } from "./client.js";
import { parseCounterHash } from "./counter-hash.js";
import type { RedisKeys } from "./keys.js";

export interface CachedInspection extends CachedTarget {
  /** Seconds since anything read or wrote the counter hash, before this inspection. */
  readonly idleSeconds: number;
}

export interface ScanPage {
  readonly targets: Target[];
  /** Where the scan goes on, or null when it is complete. */
  readonly cursor: string | null;
}

export interface ReconcileCacheStore {
  /** The next page of liked-kind targets (posts, comments) whose counter hash Redis holds. */
  scan(cursor: string | null, count: number): Promise<ScanPage>;
  /** Each target's count, members and version (null where Redis no longer holds it). */
  inspect(targets: readonly Target[]): Promise<(CachedInspection | null)[]>;
  /** Which targets Redis holds. */
  holds(targets: readonly Target[]): Promise<boolean[]>;
  /** Sets the like counter to the member count if the target is unchanged since `observedVersion`. */
  recount(target: Target, observedVersion: bigint): Promise<"recounted" | "changed" | "absent">;
  /** Keys in the server(s), for progress estimates. */
  size(): Promise<number>;
}

const counterKey = /^cnt:\{\d+\}:(post|comment):(\d+)$/;

export function createReconcileCacheStore(redis: RedisClient, keys: RedisKeys): ReconcileCacheStore {
  const masters = (): Redis[] => (redis instanceof Cluster ? redis.nodes("master") : [redis]);
  const shardsOf = (target: Target, newest: number) =>
    Array.from({ length: newest + 1 }, (_, g) => keys.generationShards(target, g)).flat();

  return {
    async scan(cursor, count) {
      // The cursor names the master node and that node's SCAN cursor.
      const [nodeText = "0", nodeCursor = "0"] = (cursor ?? "0:0").split(":");
      const nodes = masters();
      const node = Number(nodeText);
      const [next, found] = await (nodes[node] as Redis).scan(nodeCursor, "MATCH", "cnt:*", "COUNT", count);
      const targets = found.flatMap((key) => {
        const m = counterKey.exec(key);
        return m ? [{ type: m[1] as "post" | "comment", id: BigInt(m[2] as string) }] : [];
      });
      const done = next === "0";
      return { targets, cursor: done ? (node + 1 < nodes.length ? `${node + 1}:0` : null) : `${node}:${next}` };
    },
    async inspect(targets) {
      return Promise.all(
        targets.map(async (target) => {
          const counters = keys.counters(target);
          // Idle time first: reading the hash resets it.
          const idleSeconds = Number(await redis.object("IDLETIME", counters).catch(() => 0));
          const raw = await redis.hgetall(counters);
          if (Object.keys(raw).length === 0) return null;
          const hash = parseCounterHash(raw);
          const shards = shardsOf(target, hash.generation);
          const members: bigint[] = [];
          for (let i = 0; i < shards.length; i += 512) {
            const contents = await Promise.all(shards.slice(i, i + 512).map((k) => redis.smembers(k)));
            for (const ids of contents) for (const id of ids) members.push(BigInt(id));
          }
          // A change between reading the hash and its shards: report it as in flight (version -1 matches nothing).
          const after = await redis.hget(counters, "ver");
          const version = (after === null ? 0n : BigInt(after)) === hash.version ? hash.version : -1n;
          return { target, count: hash.counts.like ?? 0, members, version, idleSeconds };
        }),
      );
    },
    async holds(targets) {
      const exists = await Promise.all(targets.map((t) => redis.exists(keys.counters(t))));
      return exists.map((n) => n === 1);
    },
    async recount(target, observedVersion) {
      const newest = Number((await redis.hget(keys.counters(target), "gen")) ?? 0);
      const shards = shardsOf(target, newest);
      const reply = await redis.recountCache(1 + shards.length, keys.counters(target), ...shards, observedVersion.toString());
      return reply === -1 ? "absent" : reply === -5 ? "changed" : "recounted";
    },
    async size() {
      const sizes = await Promise.all(masters().map((n) => n.dbsize()));
      return sizes.reduce((a, b) => a + b, 0);
    },
  };
}
