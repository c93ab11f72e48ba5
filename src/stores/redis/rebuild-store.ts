// Puts a target back into Redis from what PostgreSQL holds, and brings late
// changes into a rebuilt target (scripts/replay-change.lua).
import { randomUUID } from "node:crypto";
import { Cluster } from "ioredis";
import type { LikeableTarget } from "../../domain/model.js";
import type { RebuildStore } from "../../domain/ports.js";
import type { RedisClient } from "./client.js";
import {
  authorField,
  defaultShardCapacity,
  epochField,
  generationField,
  snapshotMarkField,
  membershipFanout,
  membershipGenerations,
  mix32,
  versionField,
  type RedisKeys,
} from "./keys.js";
import { epochScale, splitVersion, versionOf } from "../versions.js";
import { ScriptStatus, toError } from "./statuses.js";

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
  async function evict(target: LikeableTarget, persisted: { epoch: bigint; micros: bigint }, leaveVersion: boolean): Promise<"evicted" | "absent" | "kept"> {
    const newest = Number((await redis.hget(keys.counters(target), generationField)) ?? 0);
    if (newest > evictableGenerations && !leaveVersion) return "kept";
    // A drop of a bigger target leaves its later generations to its rebuild (see write).
    const generation = Math.min(newest, evictableGenerations);
    const shards = Array.from({ length: generation + 1 }, (_, g) => keys.generationShards(target, g)).flat();
    const [status] = await redis.evictTarget(
      3 + shards.length, keys.counters(target), keys.touched(target), keys.dropped(target), ...shards,
      generation, persisted.epoch.toString(), persisted.micros.toString(), leaveVersion ? "1" : "0",
    );
    switch (status) {
      case ScriptStatus.Applied:
        return "evicted";
      case ScriptStatus.TargetAbsent:
        return "absent";
      case ScriptStatus.TooManyGenerations:
      case ScriptStatus.NotPersisted:
        return "kept";
      default:
        throw toError("evict-target", status, target);
    }
  }

  return {
    async lock(target, ttlMs) {
      const token = randomUUID();
      return (await redis.set(keys.rebuildLock(target), token, "PX", ttlMs, "NX")) === "OK" ? token : null;
    },
    async unlock(target, token) {
      await redis.releaseLock(keys.rebuildLock(target), token);
    },
    async write(target, snapshot, authorId) {
      const generation = rebuildGeneration(snapshot.members, shardCapacity);
      const shards = new Map<string, string[]>();
      for (const member of snapshot.members) {
        const key = keys.memberShard(target, member, generation);
        shards.set(key, [...(shards.get(key) ?? []), member.toString()]);
      }
      // All in one slot, so one pipeline works on a cluster too.
      // Shards a partial loss may have left behind (a hash lost alone) go first: stale members would otherwise count twice.
      // A dropped big target left the generations past what a drop removes.
      const droppedGeneration = Number((await redis.get(keys.dropped(target)))?.split(":")[2] ?? 0);
      for (let g = evictableGenerations + 1; g <= droppedGeneration; g++) {
        const later = keys.generationShards(target, g);
        for (let i = 0; i < later.length; i += 1_000) await redis.del(...later.slice(i, i + 1_000));
      }
      const stale = Array.from({ length: evictableGenerations + 1 }, (_, g) => keys.generationShards(target, g)).flat();
      {
        const pipeline = redis.pipeline();
        pipeline.del(...stale, keys.touched(target));
        for (const [key, members] of shards) pipeline.sadd(key, ...members);
        const results = (await pipeline.exec()) ?? [];
        const failed = results.find(([error]) => error)?.[0];
        if (failed) throw failed;
      }
      const fields: (string | number)[] = [
        ...Object.entries(snapshot.counts).flat(),
        "like", snapshot.members.length,
        generationField, generation,
        // A fresh epoch: the target's next change outranks every change made before.
        epochField, snapshot.epoch.toString(),
        versionField, 0,
        snapshotMarkField, snapshot.mark,
      ];
      if (authorId !== null) fields.push(authorField, authorId.toString());
      const [status] = await redis.finishRebuild(keys.counters(target), ...fields);
      // What a drop left is done with: its later generations are gone and its changes were waited for.
      if (status === ScriptStatus.Applied) await redis.del(keys.dropped(target));
      if (status === ScriptStatus.Applied || status === ScriptStatus.Unchanged) return status === ScriptStatus.Applied;
      throw toError("finish-rebuild", status, target);
    },
    async replay({ target, userId, liked, version, intoEpoch }) {
      const { epoch, micros } = splitVersion(version);
      const [status] = await redis.replayChange(
        keys.counters(target), keys.outbox(target), keys.touched(target), keys.receipt(target), ...keys.memberShards(target, userId),
        userId.toString(), liked ? "1" : "0", epoch.toString(), micros.toString(), shardCapacity, intoEpoch.toString(),
      );
      switch (status) {
        case ScriptStatus.Applied:
          return "replayed";
        case ScriptStatus.Unchanged:
          return "unchanged";
        case ScriptStatus.TooLate:
          return "tooLate";
        default:
          throw toError("replay-change", status, target);
      }
    },
    evict: (target, persistedVersion) => evict(target, splitVersion(persistedVersion), false),
    // Above every epoch a version can name, so the version check never keeps the target.
    drop: (target) => evict(target, { epoch: 2n ** 52n, micros: 0n }, true),
    async droppedVersion(target) {
      const left = await redis.get(keys.dropped(target));
      const [epoch, micros] = left?.split(":") ?? [];
      return epoch && micros ? versionOf(BigInt(epoch), BigInt(micros)) : null;
    },
    async rebuilds(targets) {
      const values =
        redis instanceof Cluster
          ? await Promise.all(targets.map((t) => redis.hmget(keys.counters(t), epochField, snapshotMarkField)))
          : ((await redis.pipeline(targets.map((t) => ["hmget", keys.counters(t), epochField, snapshotMarkField])).exec()) ?? []).map(
              ([, v]) => v as (string | null)[],
            );
      // No mark: never rebuilt (epoch 0, where nothing is older), rebuilt before marks, or not held; nothing to replay.
      return values.map(([epoch, mark]) => (epoch && mark ? { epoch: BigInt(epoch), epochStart: BigInt(epoch) * epochScale, mark } : null));
    },
  };
}
