// Puts a target back into Redis from what PostgreSQL holds, and brings late
// changes into a rebuilt target (scripts/replay-change.lua, scripts/replay-views.lua).
import { Cluster } from "ioredis";
import { acquireLock } from "./lease-store.js";
import { relations, relationsOf, type Target } from "../../domain/model/index.js";
import type { HeldTarget, Holding, RebuildStore } from "../../domain/ports/index.js";
import { inOneTrip, pipelineReplies, type RedisClient } from "./client.js";
import {
  authorField,
  defaultShardCapacity,
  epochField,
  epochViewsField,
  membershipFanout,
  membershipGenerations,
  mix32,
  seqFieldPrefix,
  snapshotMarkField,
  versionField,
  type RedisKeys,
} from "./keys.js";
import { memberIndexesOf, type MemberIndexes } from "./member-index-store.js";
import { perNode } from "./per-node.js";
import { relationLayouts } from "./relations.js";
import { epochScale, splitVersion, versionOf } from "../versions.js";
import { ScriptStatus, toError, type ScriptReply } from "./statuses.js";
import { keepsUseRecord, useScore } from "./use-records.js";

/** Generations a target may have grown through and still be evicted or rebuilt over: 1 + 8 + 64 shards. */
export const evictableGenerations = 2;

/** The rebuild window of scripts/includes/rebuild-window.lua, for the views a rebuilt post notes. */
const rebuildWindowMs = 3_600_000;

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

/**
 * The version a dropped target's record holds ('epoch:micros:generation'), or null for none;
 * null too for a target that stamped no change since its load (micros 0): none of its changes
 * can be in flight.
 */
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

// eslint-disable-next-line max-lines-per-function -- a store's methods share its client and keys in one closure; each is one port method.
export function createRebuildStore(
  redis: RedisClient,
  keys: RedisKeys,
  shardCapacity = defaultShardCapacity,
  memberIndexes: MemberIndexes | null = memberIndexesOf(redis, keys),
): RebuildStore {
  /** Everything of a target besides its counter hash: rebuild records and shards of generations 0..upTo of each relation. */
  const recordsAndShards = (target: Target, upTo: number) => [
    ...relationsOf(target.type).map((relation) => keys.touched(target, relation)),
    ...(target.type === "post" ? [keys.viewsReplayed(target)] : []),
    ...relationsOf(target.type).flatMap((relation) => Array.from({ length: upTo + 1 }, (_, g) => keys.generationShards(relation, target, g)).flat()),
  ];

  /** evict-target.lua's modes: evict when persisted, drop whatever it holds, drop only a suspect target. */
  type EvictMode = "evict" | "drop" | "dropSuspect";
  const modeArgument: Record<EvictMode, string> = { evict: "0", drop: "1", dropSuspect: "2" };

  async function evict(target: Target, persisted: { epoch: bigint; micros: bigint }, mode: EvictMode): Promise<"evicted" | "absent" | "kept"> {
    const leaveVersion = mode !== "evict";
    const generationFields = relationsOf(target.type).map((relation) => relationLayouts[relation].generationField);
    const held = await redis.hmget(keys.counters(target), ...generationFields);
    const newest = Math.max(0, ...held.map((g) => Number(g ?? 0)));
    if (newest > evictableGenerations && !leaveVersion) return "kept";
    // A drop of a bigger target leaves its later generations to its rebuild (see write).
    const generation = Math.min(newest, evictableGenerations);
    const rest = recordsAndShards(target, generation);
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

  return {
    lock: (target, ttlMs, token) => acquireLock(redis, keys.rebuildLock(target), ttlMs, token),
    async unlock(target, token) {
      await redis.releaseLock(keys.rebuildLock(target), token);
    },
    async held(targets) {
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
    },
    async lockMany(targets, ttlMs, tokens) {
      const asked = targets.map((t, i) => [t, tokens[i] as string] as const);
      const found = await inOneTrip(redis, asked, (to, [t, token]) => to.set(keys.rebuildLock(t), token, "PX", ttlMs, "NX", "GET"));
      return found.map((held, i) => (held === null || held === tokens[i] ? (tokens[i] as string) : null));
    },
    async unlockMany(targets, tokens) {
      const asked = targets.map((t, i) => [t, tokens[i] as string] as const);
      await inOneTrip(redis, asked, (to, [t, token]) => to.releaseLock(keys.rebuildLock(t), token));
    },
    async adopt(target, version) {
      const { epoch, micros } = splitVersion(version);
      const [status] = await redis.adoptTarget(keys.counters(target), epoch.toString(), micros.toString());
      if (status === ScriptStatus.Applied || status === ScriptStatus.Unchanged) return true;
      if (status === ScriptStatus.TargetAbsent) return false;
      throw toError("adopt-target", status, target);
    },
    async droppedVersions(targets) {
      if (targets.length === 0) return [];
      // One MGET on a standalone Redis; on a cluster the keys span slots, so one GET each, grouped per node.
      // Either way in the tick's pipeline, after a read of the targets the caller asked just before (held,
      // or a read of their counters): a target dropped between the two is then found dropped, never missed by both.
      const left =
        redis instanceof Cluster
          ? await inOneTrip(redis, targets, (to, t) => to.get(keys.dropped(t)))
          : (((await inOneTrip(redis, [targets], (to, all) => to.mget(all.map((t) => keys.dropped(t)))))[0] ?? []) as unknown[]);
      return left.map((value) => droppedOf(value as string | null));
    },
    async write(target, snapshot, authorId, token) {
      const [exists, droppedLeft] = (await pipelineReplies(redis.pipeline().exists(keys.counters(target)).get(keys.dropped(target)).exec())) as [
        number,
        string | null,
      ];
      // A target Redis holds keeps its shards: the wipe below is for what a partial loss left.
      if (exists === 1) return "held";
      const held = relationsOf(target.type).map((relation) => {
        const members = snapshot.members[relation] ?? [];
        const generation = rebuildGeneration(members, shardCapacity);
        const shards = new Map<string, string[]>();
        for (const member of members) {
          const key = keys.memberShard(relation, target, member, generation);
          shards.set(key, [...(shards.get(key) ?? []), member.toString()]);
        }
        return { relation, members, generation, shards };
      });
      // A dropped big target left the generations past what a drop removes.
      const droppedGeneration = Number(droppedLeft?.split(":")[2] ?? 0);
      for (const relation of relationsOf(target.type)) {
        for (let g = evictableGenerations + 1; g <= droppedGeneration; g++) {
          const later = keys.generationShards(relation, target, g);
          for (let i = 0; i < later.length; i += 1_000) await redis.del(...later.slice(i, i + 1_000));
        }
      }
      // One round trip, in order: the target's keys (one slot, so one pipeline works on a cluster too),
      // its members' notes in their indexes (a standalone Redis's), and last the counter hash.
      const pipeline = redis.pipeline();
      // Shards a partial loss may have left behind (a hash lost alone) go first: stale members would otherwise count twice.
      pipeline.del(...recordsAndShards(target, evictableGenerations));
      for (const { shards } of held) for (const [key, members] of shards) pipeline.sadd(key, ...members);
      // Loaded counts as used: it is the newest target Redis holds.
      if (keepsUseRecord(target)) pipeline.zadd(keys.use(target).key, useScore(), keys.use(target).member);
      // The views of earlier epochs the snapshot holds: late ones add only what exceeds these.
      if (snapshot.viewTotals.length > 0) {
        pipeline.hset(keys.viewsReplayed(target), ...snapshot.viewTotals.flatMap((v) => [v.epoch.toString(), String(v.total)]));
        // Outlasts the window, which opens a little after this write: a replay inside it must find what the post holds.
        pipeline.pexpire(keys.viewsReplayed(target), rebuildWindowMs + 60_000);
      }
      let notes = 0;
      if (memberIndexes) {
        for (const { relation, members } of held) {
          for (let i = 0; i < members.length; i += 1_000) {
            const indexes = members.slice(i, i + 1_000).map((member) => memberIndexes.key(relation, target.type, member));
            pipeline.noteMembers(indexes.length, ...indexes, target.id.toString(), memberIndexes.capacity);
            notes++;
          }
        }
      }
      const fields: (string | number)[] = [
        ...Object.entries(snapshot.counts).flat(),
        ...Object.entries(snapshot.seqs).flatMap(([name, seq]) => [seqFieldPrefix + name, seq.toString()]),
        ...held.flatMap(({ relation, members, generation }) => [
          relations[relation].counter,
          members.length,
          relationLayouts[relation].generationField,
          generation,
        ]),
        // A fresh epoch: the target's next change outranks every change made before.
        epochField,
        snapshot.epoch.toString(),
        versionField,
        0,
        snapshotMarkField,
        snapshot.mark,
      ];
      if (target.type === "post") fields.push(epochViewsField, 0);
      if (authorId !== null) fields.push(authorField, authorId.toString());
      pipeline.finishRebuild(keys.counters(target), keys.rebuildLock(target), keys.dropped(target), token, ...fields);
      const replies = (await pipelineReplies(pipeline.exec())) as ScriptReply[];
      for (const [status] of replies.slice(replies.length - 1 - notes, replies.length - 1)) {
        if (status !== ScriptStatus.Applied) throw toError("note-members", status, target);
      }
      const [status] = replies.at(-1) as ScriptReply;
      if (status === ScriptStatus.Applied || status === ScriptStatus.Unchanged) return status === ScriptStatus.Applied ? "written" : "held";
      if (status === ScriptStatus.LockLost) return "lockLost";
      throw toError("finish-rebuild", status, target);
    },
    async replay({ relation, target, userId, member, version, intoEpoch }) {
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
    },
    async replayViews({ target, epoch, total, intoEpoch }) {
      const [status] = await redis.replayViews(keys.counters(target), keys.viewsReplayed(target), epoch.toString(), total, intoEpoch.toString());
      return replayOutcome("replay-views", status, target);
    },
    evict: (target, persistedVersion) => evict(target, splitVersion(persistedVersion), "evict"),
    // Above every epoch a version can name, so the version check never keeps the target.
    drop: (target) => evict(target, { epoch: 2n ** 52n, micros: 0n }, "drop"),
    dropSuspect: (target) => evict(target, { epoch: 2n ** 52n, micros: 0n }, "dropSuspect"),
    async droppedVersion(target) {
      return droppedOf(await redis.get(keys.dropped(target)));
    },
    async rebuilds(targets) {
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
    },
  };
}
