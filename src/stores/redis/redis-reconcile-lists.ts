// Users' lists as a reconcile pass reads them from Redis: found by their horizons
// with SCAN, read without keeping them alive, and dropped when they disagree.
import { listedRelations, decimalIdSource, type ListedRelation, type ListPosition, type Relation } from "../../domain/model/index.js";
import type { ListRef } from "../../domain/ports/index.js";
import type { RedisKeys } from "./keys.js";
import { parsePosition as parseListPosition } from "./list-store.js";
import { scanNodes, type ReconcileRedis } from "./redis-reconcile-scan.js";
import { relationOfTag } from "./relations.js";

/** A user's list key (keys.ts: <prefix>:{p}:user:<id>:<tag>): the user and the relation's tag. */
const listKey = new RegExp(`^[^:]+:\\{\\d+\\}:user:(${decimalIdSource}):([a-z]+)$`);

// Lists are found by their horizons, which only a held (or loading) list has; keys.ts builds every key,
// so a key is taken for a list's only when keys.list() builds the same one back.
const listsPattern = (keys: RedisKeys) => `${keys.list("like", 1n).horizon.split(":")[0] ?? ""}:*`;
const listOf = (keys: RedisKeys, key: string): ListRef | null => {
  const match = listKey.exec(key);
  const relation = match ? relationOfTag(match[2] as string) : null;
  if (!match || !relation || !(listedRelations as readonly Relation[]).includes(relation)) return null;
  const ref = { relation: relation as ListedRelation, userId: BigInt(match[1] as string) };
  return keys.list(ref.relation, ref.userId).horizon === key ? ref : null;
};

export async function scanLists({ redis, keys }: ReconcileRedis, cursor: string | null, count: number) {
  const page = await scanNodes(redis, cursor, listsPattern(keys), count);
  return { lists: page.found.flatMap((key) => listOf(keys, key) ?? []), cursor: page.cursor };
}

export async function readLists({ redis, keys }: ReconcileRedis, lists: readonly ListRef[]) {
  return Promise.all(
    lists.map(async ({ relation, userId }) => {
      const list = keys.list(relation, userId);
      // Plain reads: a pass keeps no list alive longer. The horizon read again tells a list loaded meanwhile.
      const [horizon, flat, again] = await Promise.all([redis.get(list.horizon), redis.zrange(list.entries, "0", "-1", "WITHSCORES"), redis.get(list.horizon)]);
      if (horizon === null || horizon === "loading" || again !== horizon) return null;
      const entries: ListPosition[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) entries.push({ targetId: BigInt(flat[i] as string), at: new Date(Number(flat[i + 1])) });
      // Stamped with the replication history it was loaded in (scripts/includes/list-positions.lua).
      const position = horizon.split("@")[0] ?? "";
      return { entries, horizon: position === "" ? null : parseListPosition(position) };
    }),
  );
}

export async function listRecords({ redis, keys }: ReconcileRedis, { relation, userId }: ListRef, targetIds: readonly bigint[]) {
  if (targetIds.length === 0) return [];
  const records = await redis.hmget(keys.list(relation, userId).recent, ...targetIds.map(String));
  return records.map((r) => r !== null);
}

export async function dropList({ redis, keys }: ReconcileRedis, { relation, userId }: ListRef) {
  const list = keys.list(relation, userId);
  // One slot (the user's): a load under way finds its horizon gone and leaves the list to the next read.
  await redis.del(list.horizon, list.entries);
}
