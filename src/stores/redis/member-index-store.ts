// Member indexes (scripts/includes/member-index.lua): per user, relation and target
// type, a superset of the targets the user joined, kept in the user's slot so a feed
// rules out most of its targets with one SMISMEMBER. Only a standalone Redis keeps
// them: on a cluster a like's script cannot reach the user's slot.
import { Cluster } from "ioredis";
import type { Relation, TargetType } from "../../domain/model/index.js";
import type { MemberIndexStore } from "../../domain/ports/index.js";
import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";
import { ScriptStatus, toError } from "./statuses.js";

/**
 * Targets an index holds at most. Past it the index is marked overflowed and its
 * user's memberships are looked up target by target; under the bound of 10,000
 * members on any key, and a few hundred likes is what most users ever give.
 */
export const memberIndexCapacity = 5_000;

/** Where a Redis keeps member indexes, and how big they grow; null on a cluster. */
export interface MemberIndexes {
  readonly capacity: number;
  key(relation: Relation, targetType: TargetType, userId: bigint): string;
}

export function memberIndexesOf(redis: RedisClient, keys: RedisKeys, capacity = memberIndexCapacity): MemberIndexes | null {
  return redis instanceof Cluster ? null : { capacity, key: (relation, targetType, userId) => keys.memberIndex(relation, targetType, userId) };
}

export function createMemberIndexStore(redis: RedisClient, indexes: MemberIndexes): MemberIndexStore {
  return {
    capacity: indexes.capacity,
    async begin(relation, targetType, userId) {
      const [status] = await redis.beginMemberIndex(indexes.key(relation, targetType, userId));
      if (status !== ScriptStatus.Applied) throw toError("begin-member-index", status, { type: "user", id: userId });
    },
    async complete(relation, targetType, userId, targetIds, overflowed) {
      const key = indexes.key(relation, targetType, userId);
      const [status] = await redis.completeMemberIndex(key, indexes.capacity, overflowed ? 1 : 0, ...targetIds.map(String));
      if (status !== ScriptStatus.Applied) throw toError("complete-member-index", status, { type: "user", id: userId });
    },
  };
}
