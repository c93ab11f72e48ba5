// What a reconcile pass reads from Redis: counter hashes found by SCAN (never
// KEYS), each with its members (whole for small targets, in bounded pieces for
// big ones), and the one repair it makes here.
import { Cluster, type Redis } from "ioredis";
import {
  decimalIdSource,
  derivedCounters,
  listedRelations,
  relations,
  type CounterName,
  type ListedRelation,
  type ListPosition,
  type RedisTarget,
  type Relation,
  type Target,
} from "../../domain/model/index.js";
import type { ListRef, RedisReconcileStore, RelationTarget } from "../../domain/ports/index.js";
import type { RedisClient } from "./client.js";
import { parseCounterHash } from "./counter-hash.js";
import { splitVersion, versionOf } from "../versions.js";
import { epochField, membershipFanout, seqFieldPrefix, versionField, type RedisKeys } from "./keys.js";
import { parsePosition as parseListPosition } from "./list-store.js";
import { relationLayouts, relationOfTag } from "./relations.js";
import { ScriptStatus, toError } from "./statuses.js";
import { keepsUseRecord, useScore } from "./use-records.js";

/** A user's list key (keys.ts: <prefix>:{p}:user:<id>:<tag>): the user and the relation's tag. */
const listKey = new RegExp(`^[^:]+:\\{\\d+\\}:user:(${decimalIdSource}):([a-z]+)$`);

/**
 * How long a pass's note of a target in flight lasts: past a week of daily
 * passes, so `stuckAfterPasses` passes in a row can see it, yet notes of
 * targets that settled (or left Redis) clean themselves up.
 */
const inFlightNoteSeconds = 8 * 24 * 3600;
/** Commands sent together when a target has thousands of shards: bounds the replies held at once. */
const commandsPerRound = 1024;

// eslint-disable-next-line max-lines-per-function -- a store's methods share its client and keys in one closure; each is one port method.
export function createRedisReconcileStore(redis: RedisClient, keys: RedisKeys): RedisReconcileStore {
  const masters = (): Redis[] => (redis instanceof Cluster ? redis.nodes("master") : [redis]);
  const shardsOf = ({ relation, target }: RelationTarget, newest: number) =>
    Array.from({ length: newest + 1 }, (_, g) => keys.generationShards(relation, target, g)).flat();
  /** Runs `command` over `items` a round at a time; all of one target, so one slot. */
  async function inRounds<T, R>(items: readonly T[], command: (item: T) => Promise<R>): Promise<R[]> {
    const results: R[] = [];
    for (let i = 0; i < items.length; i += commandsPerRound) results.push(...(await Promise.all(items.slice(i, i + commandsPerRound).map(command))));
    return results;
  }
  /** Whether generation g's shards (in shardsOf's order: 1, 8, 64, … shards) hold a member. */
  const generationHolds = (g: number, sizes: readonly number[]) => {
    const first = (membershipFanout ** g - 1) / (membershipFanout - 1);
    return sizes.slice(first, first + membershipFanout ** g).some((n) => n > 0);
  };
  const versionNow = async (target: Target) => {
    const [epoch, micros] = await redis.hmget(keys.counters(target), epochField, versionField);
    return { epoch, micros };
  };

  /** One SCAN over every master in turn; the cursor names the master node and that node's SCAN cursor. */
  async function scanNodes(cursor: string | null, pattern: string, count: number): Promise<{ found: string[]; cursor: string | null }> {
    const [nodeText = "0", nodeCursor = "0"] = (cursor ?? "0:0").split(":");
    const nodes = masters();
    const node = Number(nodeText);
    const [next, found] = await (nodes[node] as Redis).scan(nodeCursor, "MATCH", pattern, "COUNT", count);
    const done = next === "0";
    return { found, cursor: done ? (node + 1 < nodes.length ? `${node + 1}:0` : null) : `${node}:${next}` };
  }
  // Lists are found by their horizons, which only a held (or loading) list has; keys.ts builds every key,
  // so a key is taken for a list's only when keys.list() builds the same one back.
  const listsPattern = `${keys.list("like", 1n).horizon.split(":")[0] ?? ""}:*`;
  const listOf = (key: string): ListRef | null => {
    const match = listKey.exec(key);
    const relation = match ? relationOfTag(match[2] as string) : null;
    if (!match || !relation || !(listedRelations as readonly Relation[]).includes(relation)) return null;
    const ref = { relation: relation as ListedRelation, userId: BigInt(match[1] as string) };
    return keys.list(ref.relation, ref.userId).horizon === key ? ref : null;
  };

  /**
   * How long the target has gone unused, by its use record (use-records.ts): never by the
   * key's own idle time, which this pass's reads reset. A target loaded before records
   * were kept gets one now, and is idle from here.
   */
  async function idleOf(target: Target): Promise<number> {
    if (!keepsUseRecord(target)) return 0;
    const { key, member } = keys.use(target);
    const usedAt = await redis.zscore(key, member);
    if (usedAt !== null) return Math.max(0, useScore() - Number(usedAt));
    await redis.zadd(key, "NX", useScore(), member);
    return 0;
  }

  async function survey(items: readonly RelationTarget[], memberLimit: number): Promise<(RedisTarget | null)[]> {
    return Promise.all(
      items.map(async (item): Promise<RedisTarget | null> => {
        const { relation, target } = item;
        const counters = keys.counters(target);
        const raw = await redis.hgetall(counters);
        if (Object.keys(raw).length === 0) return null;
        const idleSeconds = await idleOf(target);
        const hash = parseCounterHash(raw);
        const generation = hash.generations[relation];
        const shards = shardsOf(item, generation);
        // Sizes first, so a big target's members are never loaded whole.
        const sizes = await inRounds(shards, (k) => redis.scard(k));
        const memberCount = sizes.reduce((a, b) => a + b, 0);
        let members: bigint[] | null = null;
        if (memberCount <= memberLimit) {
          members = [];
          const contents = await inRounds(
            shards.filter((_, i) => (sizes[i] ?? 0) > 0),
            (k) => redis.smembers(k),
          );
          for (const ids of contents) for (const id of ids) members.push(BigInt(id));
        }
        // A change between reading the hash and its shards: report it as in flight (version -1 matches nothing).
        const { epoch, micros } = await versionNow(target);
        const unchanged = versionOf(BigInt(epoch ?? 0), BigInt(micros ?? 0)) === hash.version && (members === null || members.length === memberCount);
        return {
          relation,
          target,
          count: hash.counts[relations[relation].counter] ?? 0,
          members,
          memberCount,
          generations: Array.from({ length: generation + 1 }, (_, g) => g).filter((g) => generationHolds(g, sizes)),
          version: unchanged ? hash.version : -1n,
          idleSeconds,
        };
      }),
    );
  }

  return {
    async scan(cursor, count) {
      const page = await scanNodes(cursor, keys.countersPattern, count);
      return { targets: page.found.flatMap((key) => keys.parseCounters(key) ?? []), cursor: page.cursor };
    },
    inspect: (items) => survey(items, Number.POSITIVE_INFINITY) as Promise<((RedisTarget & { members: bigint[] }) | null)[]>,
    survey,
    async membersFrom({ relation, target }, generations, from, atLeast) {
      // Whole shards: each holds at most the shard capacity (far under the 10,000 bound on a key),
      // so a piece is at most `atLeast` plus one shard, whatever the target's size.
      const shards = generations.flatMap((g) => keys.generationShards(relation, target, g));
      const members: bigint[] = [];
      let next = from;
      while (next < shards.length && members.length < atLeast) {
        for (const id of await redis.smembers(shards[next] as string)) members.push(BigInt(id));
        next++;
      }
      return { members, next: next < shards.length ? next : null };
    },
    async holdsMembers({ relation, target }, generations, users) {
      // A member sits in one shard of one generation: its shard of each generation is asked,
      // users grouped by shard so one SMISMEMBER asks for all of a shard's users at once.
      const byShard = new Map<string, number[]>();
      for (const [i, user] of users.entries()) {
        const shardOf = keys.memberShardsOf(relation, user);
        for (const g of generations) {
          const key = shardOf(target, g);
          let positions = byShard.get(key);
          if (!positions) byShard.set(key, (positions = []));
          positions.push(i);
        }
      }
      const held = users.map(() => false);
      const asked = [...byShard];
      const answers = await inRounds(asked, ([key, positions]) => redis.smismember(key, ...positions.map((i) => (users[i] as bigint).toString())));
      for (const [a, [, positions]] of asked.entries()) {
        const answer = answers[a] as number[];
        for (const [j, i] of positions.entries()) if (answer[j] === 1) held[i] = true;
      }
      return held;
    },
    async version(target) {
      const { epoch, micros } = await versionNow(target);
      if (epoch === null && micros === null && (await redis.exists(keys.counters(target))) === 0) return -1n;
      return versionOf(BigInt(epoch ?? 0), BigInt(micros ?? 0));
    },
    async noteInFlight(targets) {
      const previous = await Promise.all(targets.map((t) => redis.get(keys.inFlight(t.target))));
      return Promise.all(
        targets.map(async (t, i) => {
          const seenAt = `${t.redisVersion}:${t.databaseVersion}`;
          const [versions, passes] = (previous[i] ?? "").split("/");
          // Progress on either side restarts the count: only a target that does not move is stuck.
          const inARow = versions === seenAt ? Number(passes ?? 0) + 1 : 1;
          await redis.set(keys.inFlight(t.target), `${seenAt}/${inARow}`, "EX", inFlightNoteSeconds);
          return inARow;
        }),
      );
    },
    async holds(targets) {
      const exists = await Promise.all(targets.map((t) => redis.exists(keys.counters(t))));
      return exists.map((n) => n === 1);
    },
    async recount(item, observedVersion) {
      const { relation, target } = item;
      const newest = Number((await redis.hget(keys.counters(target), relationLayouts[relation].generationField)) ?? 0);
      const shards = shardsOf(item, newest);
      const { epoch, micros } = splitVersion(observedVersion);
      const [status] = await redis.recountMembers(
        1 + shards.length,
        keys.counters(target),
        ...shards,
        epoch.toString(),
        micros.toString(),
        relations[relation].counter,
      );
      switch (status) {
        case ScriptStatus.Applied:
          return "recounted";
        case ScriptStatus.ChangedSince:
          return "changed";
        case ScriptStatus.TargetAbsent:
          return "absent";
        default:
          throw toError("recount-members", status, target);
      }
    },
    async counters(targets) {
      return Promise.all(
        targets.map(async (target) => {
          const names: CounterName[] = [...derivedCounters[target.type], ...(target.type === "post" ? (["read"] as const) : [])];
          const fields = [...names.flatMap((name) => [name, seqFieldPrefix + name]), epochField, versionField];
          const [values, exists] = await Promise.all([redis.hmget(keys.counters(target), ...fields), redis.exists(keys.counters(target))]);
          if (exists === 0) return null;
          const held: Partial<Record<CounterName, { value: number; seq: bigint }>> = {};
          names.forEach((name, i) => {
            held[name] = { value: Number(values[2 * i] ?? 0), seq: BigInt(values[2 * i + 1] ?? 0) };
          });
          const [epoch, micros] = values.slice(-2);
          return { values: held, version: versionOf(BigInt(epoch ?? 0), BigInt(micros ?? 0)) };
        }),
      );
    },
    async size() {
      const sizes = await Promise.all(masters().map((n) => n.dbsize()));
      return sizes.reduce((a, b) => a + b, 0);
    },
    async scanLists(cursor, count) {
      const page = await scanNodes(cursor, listsPattern, count);
      return { lists: page.found.flatMap((key) => listOf(key) ?? []), cursor: page.cursor };
    },
    async readLists(lists) {
      return Promise.all(
        lists.map(async ({ relation, userId }) => {
          const list = keys.list(relation, userId);
          // Plain reads: a pass keeps no list alive longer. The horizon read again tells a list loaded meanwhile.
          const [horizon, flat, again] = await Promise.all([
            redis.get(list.horizon),
            redis.zrange(list.entries, "0", "-1", "WITHSCORES"),
            redis.get(list.horizon),
          ]);
          if (horizon === null || horizon === "loading" || again !== horizon) return null;
          const entries: ListPosition[] = [];
          for (let i = 0; i + 1 < flat.length; i += 2) entries.push({ targetId: BigInt(flat[i] as string), at: new Date(Number(flat[i + 1])) });
          // Stamped with the replication history it was loaded in (scripts/includes/list-positions.lua).
          const position = horizon.split("@")[0] ?? "";
          return { entries, horizon: position === "" ? null : parseListPosition(position) };
        }),
      );
    },
    async listRecords({ relation, userId }, targetIds) {
      if (targetIds.length === 0) return [];
      const records = await redis.hmget(keys.list(relation, userId).recent, ...targetIds.map(String));
      return records.map((r) => r !== null);
    },
    async dropList({ relation, userId }) {
      const list = keys.list(relation, userId);
      // One slot (the user's): a load under way finds its horizon gone and leaves the list to the next read.
      await redis.del(list.horizon, list.entries);
    },
  };
}
