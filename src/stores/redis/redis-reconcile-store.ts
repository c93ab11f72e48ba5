// What a reconcile pass reads from Redis: counter hashes found by SCAN (never
// KEYS), each with its members (whole for small targets, in bounded pieces for
// big ones), and the one repair it makes here. The store binds its client and
// keys to the functions below; users' lists are redis-reconcile-lists.ts's.
import { derivedCounters, relations, type CounterName, type RedisTarget, type Target } from "../../domain/model/index.js";
import type { RedisReconcileStore, RelationTarget } from "../../domain/ports/index.js";
import type { RedisClient } from "./client.js";
import { parseCounterHash } from "./counter-hash.js";
import { splitVersion, versionOf } from "../versions.js";
import { epochField, membershipFanout, seqFieldPrefix, versionField, type RedisKeys } from "./keys.js";
import { dropList, listRecords, readLists, scanLists } from "./redis-reconcile-lists.js";
import { masters, scanNodes, type ReconcileRedis } from "./redis-reconcile-scan.js";
import { relationLayouts } from "./relations.js";
import { ScriptStatus, toError } from "./statuses.js";
import { keepsUseRecord, useScore } from "./use-records.js";

type Port = RedisReconcileStore;

/**
 * How long a pass's note of a target in flight lasts: past a week of daily
 * passes, so `stuckAfterPasses` passes in a row can see it, yet notes of
 * targets that settled (or left Redis) clean themselves up.
 */
const inFlightNoteSeconds = 8 * 24 * 3600;
/** Commands sent together when a target has thousands of shards: bounds the replies held at once. */
const commandsPerRound = 1024;

const shardsOf = (keys: RedisKeys, { relation, target }: RelationTarget, newest: number) =>
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

const versionNow = async ({ redis, keys }: ReconcileRedis, target: Target) => {
  const [epoch, micros] = await redis.hmget(keys.counters(target), epochField, versionField);
  return { epoch, micros };
};

/**
 * How long the target has gone unused, by its use record (use-records.ts): never by the
 * key's own idle time, which this pass's reads reset. A target loaded before records
 * were kept gets one now, and is idle from here.
 */
async function idleOf({ redis, keys }: ReconcileRedis, target: Target): Promise<number> {
  if (!keepsUseRecord(target)) return 0;
  const { key, member } = keys.use(target);
  const usedAt = await redis.zscore(key, member);
  if (usedAt !== null) return Math.max(0, useScore() - Number(usedAt));
  await redis.zadd(key, "NX", useScore(), member);
  return 0;
}

export async function survey(ctx: ReconcileRedis, items: readonly RelationTarget[], memberLimit: number): Promise<(RedisTarget | null)[]> {
  const { redis, keys } = ctx;
  return Promise.all(
    items.map(async (item): Promise<RedisTarget | null> => {
      const { relation, target } = item;
      const counters = keys.counters(target);
      const raw = await redis.hgetall(counters);
      if (Object.keys(raw).length === 0) return null;
      const idleSeconds = await idleOf(ctx, target);
      const hash = parseCounterHash(raw);
      const generation = hash.generations[relation];
      const shards = shardsOf(keys, item, generation);
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
      const { epoch, micros } = await versionNow(ctx, target);
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

export async function scan({ redis, keys }: ReconcileRedis, cursor: string | null, count: number) {
  const page = await scanNodes(redis, cursor, keys.countersPattern, count);
  return { targets: page.found.flatMap((key) => keys.parseCounters(key) ?? []), cursor: page.cursor };
}

export async function membersFrom(
  { redis, keys }: ReconcileRedis,
  { relation, target }: RelationTarget,
  generations: readonly number[],
  from: number,
  atLeast: number,
) {
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
}

export async function holdsMembers(
  { redis, keys }: ReconcileRedis,
  { relation, target }: RelationTarget,
  generations: readonly number[],
  users: readonly bigint[],
) {
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
}

export async function version(ctx: ReconcileRedis, target: Target) {
  const { redis, keys } = ctx;
  const { epoch, micros } = await versionNow(ctx, target);
  if (epoch === null && micros === null && (await redis.exists(keys.counters(target))) === 0) return -1n;
  return versionOf(BigInt(epoch ?? 0), BigInt(micros ?? 0));
}

export async function noteInFlight({ redis, keys }: ReconcileRedis, targets: Parameters<Port["noteInFlight"]>[0]) {
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
}

export async function holds({ redis, keys }: ReconcileRedis, targets: readonly Target[]) {
  const exists = await Promise.all(targets.map((t) => redis.exists(keys.counters(t))));
  return exists.map((n) => n === 1);
}

export async function recount({ redis, keys }: ReconcileRedis, item: RelationTarget, observedVersion: bigint) {
  const { relation, target } = item;
  const newest = Number((await redis.hget(keys.counters(target), relationLayouts[relation].generationField)) ?? 0);
  const shards = shardsOf(keys, item, newest);
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
}

export async function counters({ redis, keys }: ReconcileRedis, targets: readonly Target[]) {
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
}

export async function size(redis: RedisClient) {
  const sizes = await Promise.all(masters(redis).map((n) => n.dbsize()));
  return sizes.reduce((a, b) => a + b, 0);
}

export function createRedisReconcileStore(redis: RedisClient, keys: RedisKeys): RedisReconcileStore {
  const ctx: ReconcileRedis = { redis, keys };
  return {
    scan: (cursor, count) => scan(ctx, cursor, count),
    inspect: (items) => survey(ctx, items, Number.POSITIVE_INFINITY) as Promise<((RedisTarget & { members: bigint[] }) | null)[]>,
    survey: (items, memberLimit) => survey(ctx, items, memberLimit),
    membersFrom: (item, generations, from, atLeast) => membersFrom(ctx, item, generations, from, atLeast),
    holdsMembers: (item, generations, users) => holdsMembers(ctx, item, generations, users),
    version: (target) => version(ctx, target),
    noteInFlight: (targets) => noteInFlight(ctx, targets),
    holds: (targets) => holds(ctx, targets),
    recount: (item, observedVersion) => recount(ctx, item, observedVersion),
    counters: (targets) => counters(ctx, targets),
    size: () => size(redis),
    scanLists: (cursor, count) => scanLists(ctx, cursor, count),
    readLists: (lists) => readLists(ctx, lists),
    listRecords: (list, targetIds) => listRecords(ctx, list, targetIds),
    dropList: (list) => dropList(ctx, list),
  };
}
