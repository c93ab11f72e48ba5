// What a reconcile pass reads from Redis: counter hashes found by SCAN (never
// KEYS), each with its members, and the one repair it makes here.
import { Cluster, type Redis } from "ioredis";
import type { LikeableTarget, RedisTarget } from "../../domain/model.js";
import type { RedisReconcileStore } from "../../domain/ports.js";
import type { RedisClient } from "./client.js";
import { parseCounterHash } from "./counter-hash.js";
import { splitVersion, versionOf } from "../versions.js";
import { epochField, generationField, versionField, type RedisKeys } from "./keys.js";
import { ScriptStatus, toError } from "./statuses.js";

export function createRedisReconcileStore(redis: RedisClient, keys: RedisKeys): RedisReconcileStore {
  const masters = (): Redis[] => (redis instanceof Cluster ? redis.nodes("master") : [redis]);
  const shardsOf = (target: LikeableTarget, newest: number) =>
    Array.from({ length: newest + 1 }, (_, g) => keys.generationShards(target, g)).flat();

  return {
    async scan(cursor, count) {
      // The cursor names the master node and that node's SCAN cursor.
      const [nodeText = "0", nodeCursor = "0"] = (cursor ?? "0:0").split(":");
      const nodes = masters();
      const node = Number(nodeText);
      const [next, found] = await (nodes[node] as Redis).scan(nodeCursor, "MATCH", keys.countersPattern, "COUNT", count);
      const targets = found.flatMap((key) => keys.parseLikeableCounters(key) ?? []);
      const done = next === "0";
      return { targets, cursor: done ? (node + 1 < nodes.length ? `${node + 1}:0` : null) : `${node}:${next}` };
    },
    async inspect(targets) {
      return Promise.all(
        targets.map(async (target): Promise<RedisTarget | null> => {
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
          const [epoch, micros] = await redis.hmget(counters, epochField, versionField);
          const version = versionOf(BigInt(epoch ?? 0), BigInt(micros ?? 0)) === hash.version ? hash.version : -1n;
          return { target, count: hash.counts.like ?? 0, members, version, idleSeconds };
        }),
      );
    },
    async holds(targets) {
      const exists = await Promise.all(targets.map((t) => redis.exists(keys.counters(t))));
      return exists.map((n) => n === 1);
    },
    async recount(target, observedVersion) {
      const newest = Number((await redis.hget(keys.counters(target), generationField)) ?? 0);
      const shards = shardsOf(target, newest);
      const { epoch, micros } = splitVersion(observedVersion);
      const [status] = await redis.recountLikes(1 + shards.length, keys.counters(target), ...shards, epoch.toString(), micros.toString());
      switch (status) {
        case ScriptStatus.Applied:
          return "recounted";
        case ScriptStatus.ChangedSince:
          return "changed";
        case ScriptStatus.TargetAbsent:
          return "absent";
        default:
          throw toError("recount-likes", status, target);
      }
    },
    async size() {
      const sizes = await Promise.all(masters().map((n) => n.dbsize()));
      return sizes.reduce((a, b) => a + b, 0);
    },
  };
}
