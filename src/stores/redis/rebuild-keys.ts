// What a rebuild's write and an eviction share: the client, keys and shard capacity
// they work with, and the keys a target holds besides its counter hash.
import { relationsOf, type Target } from "../../domain/model/index.js";
import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";
import type { MemberIndexes } from "./member-index-store.js";

/** The client, keys and layout every function of the rebuild store takes. */
export interface RebuildRedis {
  readonly redis: RedisClient;
  readonly keys: RedisKeys;
  /** The most members a rebuild puts in one membership shard. */
  readonly shardCapacity: number;
  /** Where this Redis keeps member indexes (member-index-store.ts), or null where it keeps none. */
  readonly memberIndexes: MemberIndexes | null;
}

/** Generations a target may have grown through and still be evicted or rebuilt over: 1 + 8 + 64 shards. */
export const evictableGenerations = 2;

/** Everything of a target besides its counter hash: rebuild records and shards of generations 0..upTo of each relation. */
export const recordsAndShards = (keys: RedisKeys, target: Target, upTo: number) => [
  ...relationsOf(target.type).map((relation) => keys.touched(target, relation)),
  ...(target.type === "post" ? [keys.viewsReplayed(target)] : []),
  ...relationsOf(target.type).flatMap((relation) => Array.from({ length: upTo + 1 }, (_, g) => keys.generationShards(relation, target, g)).flat()),
];
