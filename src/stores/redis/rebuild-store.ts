// Puts a target back into Redis from what PostgreSQL holds, and brings late
// changes into a rebuilt target (scripts/replay-change.lua, scripts/replay-views.lua).
// The store binds its client and keys to the functions below; the write from a
// snapshot is rebuild-write.ts's.
import { Cluster } from "ioredis";
import { acquireLock } from "./lease-store.js";
import { relations, relationsOf, type Target } from "../../domain/model/index.js";
import type { HeldTarget, Holding, LateChange, LateViews, RebuildStore } from "../../domain/ports/index.js";
import { inOneTrip, type RedisClient } from "./client.js";
import { defaultShardCapacity, type RedisKeys } from "./keys.js";
import { memberIndexesOf, type MemberIndexes } from "./member-index-store.js";
import { perNode } from "./per-node.js";
import { evictableGenerations, recordsAndShards, type RebuildRedis } from "./rebuild-keys.js";
import { write } from "./rebuild-write.js";
import { relationLayouts } from "./relations.js";
import { epochScale, splitVersion, versionOf } from "../versions.js";
import { ScriptStatus, toError } from "./statuses.js";

/** What held-targets.lua answered of one target. */
function holdingOf(state: string | undefined): Holding {
  if (state === "1") return "held";
  if (state === undefined || state === "0") return "absent";
  const [epoch = "0", micros = "0", nodeHistory = ""] = state.split(":");
  return { suspectAt: versionOf(BigInt(epoch), BigInt(micros)), nodeHistory };
}

/** rebuild-marks.lua's answer for one target: 'epoch:micros:mark', or '' when not held. */
function heldTargetOf(line: string): HeldTarget | null {
  if (line === "") return null;
  const first = line.indexOf(":");
  const second = line.indexOf(":", first + 1);
  const epoch = BigInt(line.slice(0, first));
  const mark = line.slice(second + 1);
  return {
    version: versionOf(epoch, BigInt(line.slice(first + 1, second))),
    // No mark: never rebuilt (epoch 0, where nothing is older), or rebuilt before marks; nothing to replay.
    rebuild: mark === "" ? null : { epoch, epochStart: epoch * epochScale, mark },
  };
}

/**
 * The version a dropped target's record holds ('epoch:micros:generation'), or null for none;
 * null too for a target that stamped no change since its load (micros 0): none of its changes
 * can be in flight.
 */
function droppedOf(left: string | null): bigint | null {
  const [epoch, micros] = left?.split(":") ?? [];
  return epoch && micros && micros !== "0" ? versionOf(BigInt(epoch), BigInt(micros)) : null;
}

/** What a replay script's status says of the replay. */
function replayOutcome(script: string, status: number, target: Target): "replayed" | "unchanged" | "tooLate" {
  switch (status) {
    case ScriptStatus.Applied:
      return "replayed";
    case ScriptStatus.Unchanged:
      return "unchanged";
    case ScriptStatus.TooLate:
      return "tooLate";
    default:
      throw toError(script, status, target);
  }
}

/** evict-target.lua's modes: evict when persisted, drop whatever it holds, drop only a suspect target. */
type EvictMode = "evict" | "drop" | "dropSuspect";
const modeArgument: Record<EvictMode, string> = { evict: "0", drop: "1", dropSuspect: "2" };

/** Above every epoch a version can name, so the version check never keeps the target. */
const anyVersion = { epoch: 2n ** 52n, micros: 0n };

async function evict(
  { redis, keys }: RebuildRedis,
  target: Target,
  persisted: { epoch: bigint; micros: bigint },
  mode: EvictMode,
): Promise<"evicted" | "absent" | "kept"> {
  const leaveVersion = mode !== "evict";
  const generationFields = relationsOf(target.type).map((relation) => relationLayouts[relation].generationField);
  const held = await redis.hmget(keys.counters(target), ...generationFields);
  const newest = Math.max(0, ...held.map((g) => Number(g ?? 0)));
  if (newest > evictableGenerations && !leaveVersion) return "kept";
  // A drop of a bigger target leaves its later generations to its rebuild (see rebuild-write.ts).
  const generation = Math.min(newest, evictableGenerations);
  const rest = recordsAndShards(keys, target, generation);
  const use = keys.use(target);
  const [status] = await redis.evictTarget(
    3 + rest.length,
    keys.counters(target),
    keys.dropped(target),
    use.key,
    ...rest,
    persisted.epoch.toString(),
    persisted.micros.toString(),
    modeArgument[mode],
    generation,
    use.member,
    ...generationFields,
  );
  switch (status) {
    case ScriptStatus.Applied:
      return "evicted";
    case ScriptStatus.TargetAbsent:
      return "absent";
    case ScriptStatus.TooManyGenerations:
    case ScriptStatus.NotPersisted:
    case ScriptStatus.Unchanged:
      return "kept";
    default:
      throw toError("evict-target", status, target);
  }
}

async function held({ redis, keys }: RebuildRedis, targets: readonly Target[]): Promise<Holding[]> {
  const states = new Map<Target, Holding>();
  await perNode(
    redis,
    targets,
    (t) => [keys.counters(t)],
    async (group, { declared, named }) => {
      const [status, text] = await redis.heldTargets(declared.length, ...declared, ...named);
      if (status !== ScriptStatus.Unchanged) throw toError("held-targets", status, group[0] as Target);
      const answered = (text ?? "").split(";");
      group.forEach((t, k) => states.set(t, holdingOf(answered[k])));
    },
  );
  return targets.map((t) => states.get(t) ?? "absent");
}

async function lockMany({ redis, keys }: RebuildRedis, targets: readonly Target[], ttlMs: number, tokens: readonly string[]) {
  const asked = targets.map((t, i) => [t, tokens[i] as string] as const);
  const found = await inOneTrip(redis, asked, (to, [t, token]) => to.set(keys.rebuildLock(t), token, "PX", ttlMs, "NX", "GET"));
  return found.map((held, i) => (held === null || held === tokens[i] ? (tokens[i] as string) : null));
}

async function unlockMany({ redis, keys }: RebuildRedis, targets: readonly Target[], tokens: readonly string[]): Promise<void> {
  const asked = targets.map((t, i) => [t, tokens[i] as string] as const);
  await inOneTrip(redis, asked, (to, [t, token]) => to.releaseLock(keys.rebuildLock(t), token));
}

async function adopt({ redis, keys }: RebuildRedis, target: Target, version: bigint): Promise<boolean> {
  const { epoch, micros } = splitVersion(version);
  const [status] = await redis.adoptTarget(keys.counters(target), epoch.toString(), micros.toString());
  if (status === ScriptStatus.Applied || status === ScriptStatus.Unchanged) return true;
  if (status === ScriptStatus.TargetAbsent) return false;
  throw toError("adopt-target", status, target);
}

async function droppedVersions({ redis, keys }: RebuildRedis, targets: readonly Target[]): Promise<(bigint | null)[]> {
  if (targets.length === 0) return [];
  // One MGET on a standalone Redis; on a cluster the keys span slots, so one GET each, grouped per node.
  // Either way in the tick's pipeline, after a read of the targets the caller asked just before (held,
  // or a read of their counters): a target dropped between the two is then found dropped, never missed by both.
  const left =
    redis instanceof Cluster
      ? await inOneTrip(redis, targets, (to, t) => to.get(keys.dropped(t)))
      : (((await inOneTrip(redis, [targets], (to, all) => to.mget(all.map((t) => keys.dropped(t)))))[0] ?? []) as unknown[]);
  return left.map((value) => droppedOf(value as string | null));
}

async function replay({ redis, keys, shardCapacity, memberIndexes }: RebuildRedis, { relation, target, userId, member, version, intoEpoch }: LateChange) {
  const { epoch, micros } = splitVersion(version);
  const [status] = await redis.replayChange(
    keys.counters(target),
    keys.outbox(target),
    keys.touched(target, relation),
    keys.receipt(target),
    ...keys.memberShards(relation, target, userId),
    userId.toString(),
    member ? "1" : "0",
    epoch.toString(),
    micros.toString(),
    shardCapacity,
    intoEpoch.toString(),
    relations[relation].counter,
    relationLayouts[relation].generationField,
    memberIndexes?.key(relation, target.type, userId) ?? "",
    memberIndexes?.capacity ?? 1,
    target.id.toString(),
    target.type,
    relationLayouts[relation].tag,
  );
  return replayOutcome("replay-change", status, target);
}

async function replayViews({ redis, keys }: RebuildRedis, { target, epoch, total, intoEpoch }: LateViews) {
  const [status] = await redis.replayViews(keys.counters(target), keys.viewsReplayed(target), epoch.toString(), total, intoEpoch.toString());
  return replayOutcome("replay-views", status, target);
}

async function rebuilds({ redis, keys }: RebuildRedis, targets: readonly Target[]): Promise<(HeldTarget | null)[]> {
  const marks = new Map<Target, HeldTarget | null>();
  await perNode(
    redis,
    targets,
    (t) => [keys.counters(t)],
    async (group, { declared, named }) => {
      const [status, text] = await redis.rebuildMarks(declared.length, ...declared, ...named);
      if (status !== ScriptStatus.Unchanged) throw toError("rebuild-marks", status, group[0] as Target);
      (text ?? "").split(";").forEach((line, k) => marks.set(group[k] as Target, heldTargetOf(line)));
    },
  );
  return targets.map((t) => marks.get(t) ?? null);
}

export function createRebuildStore(
  redis: RedisClient,
  keys: RedisKeys,
  shardCapacity = defaultShardCapacity,
  memberIndexes: MemberIndexes | null = memberIndexesOf(redis, keys),
): RebuildStore {
  const ctx: RebuildRedis = { redis, keys, shardCapacity, memberIndexes };
  return {
    lock: (target, ttlMs, token) => acquireLock(redis, keys.rebuildLock(target), ttlMs, token),
    unlock: async (target, token) => {
      await redis.releaseLock(keys.rebuildLock(target), token);
    },
    held: (targets) => held(ctx, targets),
    lockMany: (targets, ttlMs, tokens) => lockMany(ctx, targets, ttlMs, tokens),
    unlockMany: (targets, tokens) => unlockMany(ctx, targets, tokens),
    adopt: (target, version) => adopt(ctx, target, version),
    droppedVersions: (targets) => droppedVersions(ctx, targets),
    write: (target, snapshot, authorId, token) => write(ctx, target, snapshot, authorId, token),
    replay: (change) => replay(ctx, change),
    replayViews: (views) => replayViews(ctx, views),
    evict: (target, persistedVersion) => evict(ctx, target, splitVersion(persistedVersion), "evict"),
    drop: (target) => evict(ctx, target, anyVersion, "drop"),
    dropSuspect: (target) => evict(ctx, target, anyVersion, "dropSuspect"),
    droppedVersion: async (target) => droppedOf(await redis.get(keys.dropped(target))),
    rebuilds: (targets) => rebuilds(ctx, targets),
  };
}
