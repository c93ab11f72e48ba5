import { Cluster } from "ioredis";
import { LRUCache } from "lru-cache";
import type { Counts, Target, TargetView } from "../../domain/model.js";
import type { CounterStore, ViewRequest } from "../../domain/ports.js";
import { batchRead, inTickPipeline, type RedisClient } from "./client.js";
import { parseCounterHash } from "./counter-hash.js";
import { authorField, generationField, type RedisKeys } from "./keys.js";
import { ScriptStatus, toError } from "./statuses.js";

/** One target as Redis answered: counters, newest generation, and the viewer's like ("unknown" past the shards asked). */
interface Read {
  readonly counts: Counts;
  readonly generation: number;
  readonly liked: boolean | "unknown";
}

/**
 * scripts/read-targets.lua's text: a line per target, '' where Redis does not
 * hold it, else the counters, the newest generation and the like, comma-separated.
 */
export function decodeTargetLines(text: string, targets: number, names: readonly string[]): (Read | null)[] {
  const lines = targets === 0 ? [] : text.split(";");
  if (lines.length !== targets) throw new Error(`read-targets answered ${lines.length} lines for ${targets} targets.`);
  return lines.map((line) => {
    if (line === "") return null;
    const values = line.split(",");
    const counts: Record<string, number> = {};
    names.forEach((name, j) => {
      const value = values[j];
      if (value) counts[name] = Number(value);
    });
    const liked = values[names.length + 1];
    return { counts, generation: Number(values[names.length] || 0), liked: liked === "?" ? "unknown" : liked === "1" };
  });
}

export function createCounterStore(redis: RedisClient, keys: RedisKeys): CounterStore {
  // The newest membership generation this process has seen per target, so a viewer's
  // like is looked up in one round trip; a target that grew since costs a second one.
  const generations = new LRUCache<string, number>({ max: 100_000 });

  /** Reads targets, passing the viewer's shards of generations 0..shardsOf(i)-1. */
  async function readOnce(targets: readonly Target[], request: ViewRequest, shardsOf: (i: number) => number): Promise<(Read | null)[]> {
    const viewer = request.viewerId;
    if (redis instanceof Cluster) return readWithPipelines(redis, targets, request, shardsOf);
    const counterKeys: string[] = [];
    const shardKeys: string[] = [];
    const shardCounts: number[] = [];
    targets.forEach((target, i) => {
      counterKeys.push(keys.counters(target));
      const shards = viewer === null ? 0 : shardsOf(i);
      shardCounts.push(shards);
      for (let g = 0; g < shards; g++) shardKeys.push(keys.memberShard(target, viewer as bigint, g));
    });
    const args = [counterKeys.length + shardKeys.length, ...counterKeys, ...shardKeys, targets.length, viewer?.toString() ?? "", request.names.length, ...request.names, ...shardCounts];
    const [reply] = await inTickPipeline(redis, (pipeline) => void pipeline.readTargets(...(args as [number, ...(string | number)[]])));
    const [status, text] = reply as [number, string?];
    if (status !== ScriptStatus.Unchanged) throw toError("read-targets", status, targets[0] as Target);
    return decodeTargetLines(text ?? "", targets.length, request.names);
  }

  /** The same reads as commands, which ioredis's auto-pipelining groups per cluster node. */
  async function readWithPipelines(cluster: Cluster, targets: readonly Target[], request: ViewRequest, shardsOf: (i: number) => number): Promise<(Read | null)[]> {
    const fields = [...request.names, generationField];
    const viewer = request.viewerId;
    return Promise.all(
      targets.map(async (target, i): Promise<Read | null> => {
        const shards = viewer === null ? 0 : shardsOf(i);
        const [values, exists, ...members] = await Promise.all([
          cluster.hmget(keys.counters(target), ...fields),
          cluster.exists(keys.counters(target)),
          ...Array.from({ length: shards }, (_, g) => cluster.sismember(keys.memberShard(target, viewer as bigint, g), (viewer as bigint).toString())),
        ]);
        if (exists === 0) return null;
        const counts: Record<string, number> = {};
        request.names.forEach((name, j) => {
          const value = values[j];
          if (value) counts[name] = Number(value);
        });
        const generation = Number(values[request.names.length] ?? 0);
        const liked = members.some((m) => m === 1) ? true : viewer !== null && generation >= shards ? "unknown" : false;
        return { counts, generation, liked };
      }),
    );
  }

  return {
    async read(targets) {
      const hashes = await batchRead(redis, "hgetall", targets.map((t) => [keys.counters(t)] as const));
      return hashes.map((hash): Counts | null => (Object.keys(hash).length === 0 ? null : parseCounterHash(hash).counts));
    },
    async view(targets, request) {
      if (targets.length === 0) return [];
      const known = (t: Target) => (generations.get(keys.counters(t)) ?? 0) + 1;
      const first = await readOnce(targets, request, (i) => known(targets[i] as Target));
      const grown: number[] = [];
      first.forEach((read, i) => {
        if (!read) return;
        generations.set(keys.counters(targets[i] as Target), read.generation);
        if (read.liked === "unknown") grown.push(i);
      });
      if (grown.length > 0) {
        const again = await readOnce(grown.map((i) => targets[i] as Target), request, (j) => ((first[grown[j] as number] as Read).generation + 1));
        grown.forEach((i, j) => (first[i] = again[j] ?? null));
      }
      return first.map((read): TargetView | null => (read ? { counts: read.counts, viewerLikes: read.liked === true } : null));
    },
    async init(target, counts, authorId) {
      const fields: (string | number)[] = Object.entries(counts).flat();
      if (authorId !== undefined) fields.push(authorField, authorId.toString());
      const [status] = await redis.initCounters(keys.counters(target), ...fields);
      if (status === ScriptStatus.Applied || status === ScriptStatus.Unchanged) return status === ScriptStatus.Applied;
      throw toError("init-counters", status, target);
    },
    async bump(target, name, delta) {
      const [status] = await redis.bumpCounter(keys.counters(target), name, delta);
      if (status === ScriptStatus.Applied || status === ScriptStatus.TargetAbsent) return status === ScriptStatus.Applied;
      throw toError("bump-counter", status, target);
    },
  };
}
