import type { Target } from "../../domain/targets.js";
import { batchRead, type RedisClient } from "./client.js";
import { parseCounterHash, type CounterHash } from "./counter-hash.js";
import { defaultShardCapacity, type RedisKeys } from "./keys.js";
import type { MembershipReply } from "./scripts.js";

/** The like and unlike scripts' status codes (their Lua headers say when each happens). */
export const ScriptStatus = {
  Unchanged: 0,
  Changed: 1,
  TargetNotCached: -1,
  TargetFull: -2,
  InvalidArguments: -3,
} as const;

export type MembershipChange =
  | { readonly kind: "applied"; readonly changed: boolean; readonly state: CounterHash }
  | { readonly kind: "not-cached" };

export class TargetFullError extends Error {
  constructor(target: Target) {
    super(`${target.type} ${target.id} has reached the most likers its membership shards can hold.`);
  }
}

/** The one place script replies become results or errors. */
function toChange(reply: MembershipReply, target: Target): MembershipChange {
  const [code, counters] = reply;
  switch (code) {
    case ScriptStatus.Changed:
    case ScriptStatus.Unchanged:
      return { kind: "applied", changed: code === ScriptStatus.Changed, state: parseCounterHash(counters ?? []) };
    case ScriptStatus.TargetNotCached:
      return { kind: "not-cached" };
    case ScriptStatus.TargetFull:
      throw new TargetFullError(target);
    default:
      throw new Error(`Like script rejected its arguments for ${target.type} ${target.id} (status ${code}).`);
  }
}

export interface LikeStore {
  like(target: Target, userId: bigint): Promise<MembershipChange>;
  unlike(target: Target, userId: bigint): Promise<MembershipChange>;
  /**
   * Whether `userId` likes each target, in order. Looks in generation 0 for all
   * targets in one round trip; only targets that have grown past it
   * (`generationOf` says how far) cost a second one.
   */
  hasLiked(targets: readonly Target[], userId: bigint, generationOf: (t: Target) => Promise<number>): Promise<boolean[]>;
}

export function createLikeStore(redis: RedisClient, keys: RedisKeys, shardCapacity = defaultShardCapacity): LikeStore {
  return {
    async like(target, userId) {
      const shards = keys.memberShards(target, userId);
      const reply = await redis.likeTarget(keys.counters(target), keys.outbox(target), keys.touched(target), ...shards, userId.toString(), shardCapacity, "like", target.type, target.id.toString());
      return toChange(reply, target);
    },
    async unlike(target, userId) {
      const shards = keys.memberShards(target, userId);
      const reply = await redis.unlikeTarget(keys.counters(target), keys.outbox(target), keys.touched(target), ...shards, userId.toString(), "like", target.type, target.id.toString());
      return toChange(reply, target);
    },
    async hasLiked(targets, userId, generationOf) {
      const member = userId.toString();
      const inFirst = await batchRead(redis, "sismember", targets.map((t) => [keys.memberShard(t, userId, 0), member] as const));
      const liked = inFirst.map((reply) => reply === 1);
      // Targets past their first generation: look in the later ones, all in one more round trip.
      const grown = await Promise.all(
        targets.map(async (target, i) => (liked[i] ? 0 : await generationOf(target))),
      );
      const later: { index: number; key: string }[] = [];
      grown.forEach((newest, index) => {
        for (let g = 1; g <= newest; g++) later.push({ index, key: keys.memberShard(targets[index] as Target, userId, g) });
      });
      const replies = await batchRead(redis, "sismember", later.map((l) => [l.key, member] as const));
      replies.forEach((reply, i) => {
        if (reply === 1) liked[(later[i] as { index: number }).index] = true;
      });
      return liked;
    },
  };
}
