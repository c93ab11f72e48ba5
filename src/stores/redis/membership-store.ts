import { counterNames, relations, type Relation, type Target } from "../../domain/model/index.js";
import type { MembershipChange, MembershipStore } from "../../domain/ports/index.js";
import { Cluster } from "ioredis";
import { batchRead, inTickPipeline, type RedisClient } from "./client.js";
import type { HotCounts } from "./hot-counts.js";
import { defaultShardCapacity, type RedisKeys } from "./keys.js";
import { memberIndexesOf, type MemberIndexes } from "./member-index-store.js";
import { relationLayouts } from "./relations.js";
import type { MembershipReply } from "./scripts.js";
import { ScriptStatus, toError } from "./statuses.js";
import { commandTimeoutOf, writeDeadlineBy, WriteDeadlinePassedError } from "./write-deadline.js";
import { redisClockOf, type RedisClock } from "./redis-clock.js";
import { versionOf } from "../versions.js";
import { replicaAcksOf, ReplicasBehindError, type ReplicaAcks } from "./replica-acks.js";

/** The one place the membership scripts' replies become results or errors. */
function toChange(script: string, reply: MembershipReply, target: Target): MembershipChange {
  const [status] = reply;
  switch (status) {
    case ScriptStatus.Applied:
    case ScriptStatus.Unchanged: {
      const counts: Record<string, number> = {};
      const names = counterNames[target.type];
      names.forEach((name, i) => {
        const value = reply[i + 1];
        if (typeof value === "number") counts[name] = value;
      });
      const [epoch, micros] = [reply[names.length + 1], reply[names.length + 2]];
      const version = typeof epoch === "string" && typeof micros === "string" ? { version: versionOf(BigInt(epoch), BigInt(micros)) } : {};
      return { kind: "applied", changed: status === ScriptStatus.Applied, counts, ...version };
    }
    case ScriptStatus.TargetAbsent:
      return { kind: "unloaded" };
    case ScriptStatus.DeadlinePassed:
      throw new WriteDeadlinePassedError(script);
    default:
      throw toError(script, status, target);
  }
}

type MembershipScript = "addMember" | "removeMember";
type ScriptArgs = [counters: string, ...keysAndArgs: (string | number)[]];

/** What every membership call takes: the client, its keys and what the store was built with. */
interface MembershipContext {
  readonly redis: RedisClient;
  readonly keys: RedisKeys;
  readonly shardCapacity: number;
  readonly hotCounts: Pick<HotCounts, "changed"> | undefined;
  readonly memberIndexes: MemberIndexes | null;
  /** What the client waits for a command: a write's deadline is set within it (write-deadline.ts). */
  readonly timeoutMs: number;
  readonly clock: RedisClock;
  readonly replicaAcks: ReplicaAcks | null;
}

/**
 * On a standalone Redis a script call goes in the pipeline of the current tick:
 * changes arriving together share one socket write, which was a tenth of a like's
 * CPU when each went alone. A cluster routes each call to its node itself. A
 * failure is answered only once the call's deadline has passed: until then it
 * may still apply, held in a network or re-sent on a new connection. With
 * replica acks asked for, the call waits for them on a connection of its own
 * (replica-acks.ts).
 */
async function run(
  store: MembershipContext,
  script: MembershipScript,
  target: Target,
  answerAtMs: number | undefined,
  argsBy: (deadlineMs: number) => ScriptArgs,
): Promise<MembershipReply> {
  const { redis, replicaAcks } = store;
  const answerAt = answerAtMs ?? Date.now() + store.timeoutMs;
  const deadline = writeDeadlineBy(answerAt, store.clock);
  const args = argsBy(deadline.atMs);
  try {
    if (replicaAcks) return (await replicaAcks.send([script, args], answerAt)) as MembershipReply;
    if (redis instanceof Cluster) return await redis[script](...args);
    const [reply] = await inTickPipeline(redis, (pipeline) => void pipeline[script](...args));
    return reply as MembershipReply;
  } catch (error) {
    // Replicas that did not confirm a write Redis answered: it ran, and cannot apply later.
    if (!(error instanceof ReplicasBehindError && error.confirmed !== null)) await deadline.settled();
    throw error;
  } finally {
    store.hotCounts?.changed(target);
  }
}

const keysOf = (keys: RedisKeys, relation: Relation, target: Target, userId: bigint): ScriptArgs => [
  keys.counters(target),
  keys.outbox(target),
  keys.touched(target, relation),
  keys.receipt(target),
  ...keys.memberShards(relation, target, userId),
];

async function add(store: MembershipContext, relation: Relation, target: Target, userId: bigint, answerAtMs?: number): Promise<MembershipChange> {
  const { memberIndexes } = store;
  const { tag, generationField } = relationLayouts[relation];
  const reply = await run(store, "addMember", target, answerAtMs, (deadlineMs) => [
    ...keysOf(store.keys, relation, target, userId),
    userId.toString(),
    store.shardCapacity,
    relations[relation].counter,
    target.type,
    target.id.toString(),
    tag,
    generationField,
    memberIndexes?.key(relation, target.type, userId) ?? "",
    memberIndexes?.pendingKey(relation, target.type, userId) ?? "",
    memberIndexes?.capacity ?? 1,
    deadlineMs,
    ...counterNames[target.type],
  ]);
  return toChange("add-member", reply, target);
}

async function remove(store: MembershipContext, relation: Relation, target: Target, userId: bigint, answerAtMs?: number): Promise<MembershipChange> {
  const { tag, generationField } = relationLayouts[relation];
  const reply = await run(store, "removeMember", target, answerAtMs, (deadlineMs) => [
    ...keysOf(store.keys, relation, target, userId),
    userId.toString(),
    relations[relation].counter,
    target.type,
    target.id.toString(),
    tag,
    generationField,
    deadlineMs,
    ...counterNames[target.type],
  ]);
  return toChange("remove-member", reply, target);
}

/**
 * Looks in generation 0 of every target, and reads how far each has grown,
 * in one round trip; only targets past their first generation that do not
 * have the user there cost a second one.
 */
async function holds({ redis, keys }: MembershipContext, relation: Relation, targets: readonly Target[], userId: bigint): Promise<boolean[]> {
  const member = userId.toString();
  const { generationField } = relationLayouts[relation];
  const [inFirst, generations] = await Promise.all([
    batchRead(
      redis,
      "sismember",
      targets.map((t) => [keys.memberShard(relation, t, userId, 0), member] as const),
    ),
    batchRead(
      redis,
      "hget",
      targets.map((t) => [keys.counters(t), generationField] as const),
    ),
  ]);
  const held = inFirst.map((reply) => reply === 1);
  const later: { index: number; key: string }[] = [];
  targets.forEach((target, index) => {
    const newest = held[index] ? 0 : Number(generations[index] ?? 0);
    for (let g = 1; g <= newest; g++) later.push({ index, key: keys.memberShard(relation, target, userId, g) });
  });
  const replies = await batchRead(
    redis,
    "sismember",
    later.map((l) => [l.key, member] as const),
  );
  replies.forEach((reply, i) => {
    if (reply === 1) held[(later[i] as { index: number }).index] = true;
  });
  return held;
}

/**
 * `hotCounts`, when this process keeps counts in memory: told of each change it
 * makes, so its own later reads show the change without waiting for Redis to tell.
 */
export function createMembershipStore(
  redis: RedisClient,
  keys: RedisKeys,
  shardCapacity = defaultShardCapacity,
  hotCounts?: Pick<HotCounts, "changed">,
  memberIndexes: MemberIndexes | null = memberIndexesOf(redis, keys),
): MembershipStore {
  const store: MembershipContext = {
    redis,
    keys,
    shardCapacity,
    hotCounts,
    memberIndexes,
    timeoutMs: commandTimeoutOf(redis),
    clock: redisClockOf(redis),
    replicaAcks: replicaAcksOf(redis),
  };
  return {
    add: (relation, target, userId, answerAtMs) => add(store, relation, target, userId, answerAtMs),
    remove: (relation, target, userId, answerAtMs) => remove(store, relation, target, userId, answerAtMs),
    holds: (relation, targets, userId) => holds(store, relation, targets, userId),
  };
}
