// Member indexes (scripts/includes/member-index.lua): per user, relation and target
// type, a superset of the targets the user joined, kept in the user's slot so a feed
// rules out most of its targets with one SMISMEMBER. Only a standalone Redis keeps
// them: on a cluster a like's script cannot reach the user's slot.
import { performance } from "node:perf_hooks";
import { Cluster } from "ioredis";
import { LRUCache } from "lru-cache";
import type { Relation, TargetType } from "../../domain/model/index.js";
import type { MemberIndexHolds, MemberIndexLookup, MemberIndexStore } from "../../domain/ports/index.js";
import { splitVersion } from "../versions.js";
import { inOneTrip, type RedisClient } from "./client.js";
import { fenceOf, memberIndexProtocol } from "./index-fence.js";
import type { RedisKeys } from "./keys.js";
import { ScriptStatus, toError, type ScriptReply } from "./statuses.js";

/**
 * Targets an index holds at most. Past it the index is marked overflowed and its
 * user's memberships are looked up target by target; under the bound of 10,000
 * members on any key, and a few hundred likes is what most users ever give.
 */
export const memberIndexCapacity = 5_000;

/** How long a member index lives unused: includes/member-index.lua's indexIdleMs (a unit test keeps them equal). */
export const memberIndexIdleMs = 7 * 24 * 3_600_000;

/** How often one process refreshes the expiry of an index its reads use, at most. */
const refreshEveryMs = 600_000;

/** Where a Redis keeps member indexes, and how big they grow; null on a cluster. */
export interface MemberIndexes {
  readonly capacity: number;
  /** The writers' registry, which an index's completion checks (index-fence.ts). */
  readonly writers: string;
  /** The fence generation indexes complete and are read under. */
  generation(): number;
  /** Whether indexes may answer and load now: one version's protocol writes (index-fence.ts). */
  open(): boolean;
  key(relation: Relation, targetType: TargetType, userId: bigint): string;
  /** The index's pending record: the likes noted in it that PostgreSQL does not hold yet. */
  pendingKey(relation: Relation, targetType: TargetType, userId: bigint): string;
  /**
   * Tells that a read used the index: its expiry is set anew, at most once every ten
   * minutes per process and index, in the background (a failure is left to the next).
   * `loading`: the index is about to be loaded, which sets its expiry itself.
   */
  used(key: string, loading?: boolean): void;
}

export function memberIndexesOf(redis: RedisClient, keys: RedisKeys, capacity = memberIndexCapacity): MemberIndexes | null {
  if (redis instanceof Cluster) return null;
  const refreshed = new LRUCache<string, number>({ max: 100_000 });
  return {
    capacity,
    writers: keys.writers(),
    // Without a fence started on this client (a test of the stores alone), generation 0 and open.
    generation: () => fenceOf(redis)?.generation() ?? 0,
    open: () => fenceOf(redis)?.open() ?? true,
    key: (relation, targetType, userId) => keys.memberIndex(relation, targetType, userId),
    pendingKey: (relation, targetType, userId) => keys.memberPending(relation, targetType, userId),
    used(key, loading = false) {
      const now = performance.now();
      const at = refreshed.get(key);
      if (at !== undefined && now - at < refreshEveryMs) return;
      refreshed.set(key, now);
      if (loading) return;
      redis.pexpire(key, memberIndexIdleMs).catch(() => refreshed.delete(key));
    },
  };
}

/** What a read asks of a user's member index: which targets it rules out. */
export function createMemberIndexLookup(redis: RedisClient, indexes: MemberIndexes): MemberIndexLookup {
  return {
    async rulesOut(relation, targetType, userId, targetIds) {
      if (!indexes.open()) return null;
      const key = indexes.key(relation, targetType, userId);
      const generation = indexes.generation();
      const [[status, ruledOut]] = (await inOneTrip(redis, [key], (to) => to.indexRulesOut(key, generation, ...targetIds.map(String)))) as [
        ScriptReply<string>,
      ];
      if (status !== ScriptStatus.Applied) return null;
      indexes.used(key);
      return targetIds.map((_, i) => ruledOut?.[i] === "1");
    },
  };
}

/** Indexes settled in one script call at most. */
const settleSlice = 1_000;

/** Removes from users' pending records the likes PostgreSQL has now committed (scripts/settle-member-indexes.lua). */
export function createMemberIndexHolds(redis: RedisClient, indexes: MemberIndexes): MemberIndexHolds {
  return {
    async settle(committed) {
      for (let i = 0; i < committed.length; i += settleSlice) {
        const slice = committed.slice(i, i + settleSlice);
        const [status] = await redis.settleMemberIndexes(
          slice.length,
          ...slice.map((c) => indexes.pendingKey(c.relation, c.targetType, c.userId)),
          ...slice.flatMap((c) => {
            const { epoch, micros } = splitVersion(c.version);
            return [c.targetId.toString(), epoch.toString(), micros.toString()];
          }),
        );
        if (status !== ScriptStatus.Applied) throw toError("settle-member-indexes", status, { type: "user", id: committed[0]?.userId ?? 0n });
      }
    },
  };
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
      const [status] = await redis.completeMemberIndex(
        key,
        indexes.pendingKey(relation, targetType, userId),
        indexes.writers,
        indexes.capacity,
        overflowed ? 1 : 0,
        fenceOf(redis)?.protocol ?? memberIndexProtocol,
        indexes.generation(),
        ...targetIds.map(String),
      );
      // Fenced: versions overlap, or the generation just moved; the index stays incomplete, loaded again on a later read.
      if (status !== ScriptStatus.Applied && status !== ScriptStatus.Fenced) throw toError("complete-member-index", status, { type: "user", id: userId });
    },
  };
}
