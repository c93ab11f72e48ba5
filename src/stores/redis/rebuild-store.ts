// Puts a target back into Redis from what PostgreSQL holds, and brings late
// changes into a rebuilt target (scripts/replay-change.lua).
import { randomUUID } from "node:crypto";
import { Cluster } from "ioredis";
import type { Target } from "../../domain/targets.js";
import type { RedisClient } from "./client.js";
import { authorField, defaultShardCapacity, generationField, membershipFanout, membershipGenerations, mix32, versionField, type RedisKeys } from "./keys.js";

/** A target as PostgreSQL holds it. */
export interface TargetSnapshot {
  readonly members: readonly bigint[];
  /** Counters other than the like count, which is the number of members. */
  readonly counts: Readonly<Record<string, number>>;
  readonly authorId: bigint | null;
  /** Highest version of a like change PostgreSQL applied to the target. */
  readonly version: bigint;
}

export interface RebuildStore {
  /** Takes the target's rebuild lock; the token to release it, or null when another process holds it. */
  lock(target: Target, ttlMs: number): Promise<string | null>;
  unlock(target: Target, token: string): Promise<void>;
  /** Writes membership, then the counter hash that marks the target ready; false when it was already there. */
  write(target: Target, snapshot: TargetSnapshot): Promise<boolean>;
  /** Brings a change PostgreSQL applied late into a rebuilt target; true when Redis changed. */
  replay(change: { target: Target; userId: bigint; liked: boolean; version: bigint }): Promise<boolean>;
  /** When each target was rebuilt, in microseconds, or null (not rebuilt, or not in Redis). */
  rebuiltAt(targets: readonly Target[]): Promise<(bigint | null)[]>;
  /**
   * Takes a target out of Redis whole (hash, shards, touched set), to come back by a
   * rebuild. Only small targets (generation ≤ `evictableGenerations`) whose changes
   * PostgreSQL has all applied (`persistedVersion`) are evicted.
   */
  evict(target: Target, persistedVersion: bigint): Promise<"evicted" | "absent" | "kept">;
}

/** Generations a target may have grown through and still be evicted or rebuilt over: 1 + 8 + 64 shards. */
export const evictableGenerations = 2;

/** The fewest generations' worth of shards that spread `members` with no shard over capacity. */
export function rebuildGeneration(members: readonly bigint[], capacity: number): number {
  for (let g = 0; g < membershipGenerations; g++) {
    const shards = membershipFanout ** g;
    if (members.length > shards * capacity) continue;
    const load = new Map<number, number>();
    let fits = true;
    for (const m of members) {
      const s = mix32(m) % shards;
      const n = (load.get(s) ?? 0) + 1;
      load.set(s, n);
      if (n > capacity) {
        fits = false;
        break;
      }
    }
    if (fits) return g;
  }
  throw new Error(`${members.length} members do not fit the membership shards of one target.`);
}

export function createRebuildStore(redis: RedisClient, keys: RedisKeys, shardCapacity = defaultShardCapacity): RebuildStore {
  return {
    async lock(target, ttlMs) {
      const token = randomUUID();
      return (await redis.set(keys.rebuildLock(target), token, "PX", ttlMs, "NX")) === "OK" ? token : null;
    },
    async unlock(target, token) {
      await redis.releaseLock(keys.rebuildLock(target), token);
    },
    async write(target, snapshot) {
      const generation = rebuildGeneration(snapshot.members, shardCapacity);
      const shards = new Map<string, string[]>();
      for (const member of snapshot.members) {
        const key = keys.memberShard(target, member, generation);
        shards.set(key, [...(shards.get(key) ?? []), member.toString()]);
      }
      // All in one slot, so one pipeline works on a cluster too.
      // Shards a partial loss may have left behind (a hash lost alone) go first: stale members would otherwise count twice.
      const stale = Array.from({ length: evictableGenerations + 1 }, (_, g) => keys.generationShards(target, g)).flat();
      {
        const pipeline = redis.pipeline();
        pipeline.del(...stale, keys.touched(target));
        for (const [key, members] of shards) pipeline.sadd(key, ...members);
        const results = (await pipeline.exec()) ?? [];
        const failed = results.find(([error]) => error);
        if (failed) throw failed[0];
      }
      const fields: (string | number)[] = [
        ...Object.entries(snapshot.counts).flat(),
        "like", snapshot.members.length,
        generationField, generation,
        versionField, snapshot.version.toString(),
      ];
      if (snapshot.authorId !== null) fields.push(authorField, snapshot.authorId.toString());
      return (await redis.finishRebuild(keys.counters(target), ...fields)) === 1;
    },
    async replay({ target, userId, liked, version }) {
      const reply = await redis.replayChange(
        keys.counters(target), keys.outbox(target), keys.touched(target), ...keys.memberShards(target, userId),
        userId.toString(), liked ? "1" : "0", version.toString(), shardCapacity,
      );
      if (reply === -2) throw new Error(`${target.type} ${target.id} has no room left for a replayed like.`);
      return reply === 1;
    },
    async evict(target, persistedVersion) {
      const generation = Number((await redis.hget(keys.counters(target), generationField)) ?? 0);
      if (generation > evictableGenerations) return "kept";
      const shards = Array.from({ length: generation + 1 }, (_, g) => keys.generationShards(target, g)).flat();
      const reply = await redis.evictTarget(2 + shards.length, keys.counters(target), keys.touched(target), ...shards, generation, persistedVersion.toString());
      return reply === 1 ? "evicted" : reply === 0 ? "absent" : "kept";
    },
    async rebuiltAt(targets) {
      const values =
        redis instanceof Cluster
          ? await Promise.all(targets.map((t) => redis.hget(keys.counters(t), "rb")))
          : ((await redis.pipeline(targets.map((t) => ["hget", keys.counters(t), "rb"])).exec()) ?? []).map(([, v]) => v as string | null);
      return values.map((v) => (v ? BigInt(v) : null));
    },
  };
}
