// Writes a target into Redis from a PostgreSQL snapshot, under its rebuild lock: its
// members spread over the fewest generations' shards, their notes in the member
// indexes, and last the counter hash, which marks it ready (scripts/finish-rebuild.lua).
import type { ChainableCommander } from "ioredis";
import { relations, relationsOf, type Relation, type Target, type TargetSnapshot } from "../../domain/model/index.js";
import type { RebuildWrite } from "../../domain/ports/index.js";
import { pipelineReplies } from "./client.js";
import {
  authorField,
  epochField,
  epochViewsField,
  membershipFanout,
  membershipGenerations,
  mix32,
  seqFieldPrefix,
  snapshotMarkField,
  versionField,
} from "./keys.js";
import { evictableGenerations, recordsAndShards, type RebuildRedis } from "./rebuild-keys.js";
import { relationLayouts } from "./relations.js";
import { ScriptStatus, toError, type ScriptReply } from "./statuses.js";
import { keepsUseRecord, useScore } from "./use-records.js";

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

/** One relation of a snapshot as the write lays it out: its members, their generation, and each shard's members. */
interface RelationShards {
  readonly relation: Relation;
  readonly members: readonly bigint[];
  readonly generation: number;
  readonly shards: ReadonlyMap<string, readonly string[]>;
}

function shardsOf({ keys, shardCapacity }: RebuildRedis, target: Target, snapshot: TargetSnapshot): RelationShards[] {
  return relationsOf(target.type).map((relation) => {
    const members = snapshot.members[relation] ?? [];
    const generation = rebuildGeneration(members, shardCapacity);
    const shards = new Map<string, string[]>();
    for (const member of members) {
      const key = keys.memberShard(relation, target, member, generation);
      shards.set(key, [...(shards.get(key) ?? []), member.toString()]);
    }
    return { relation, members, generation, shards };
  });
}

/** A dropped big target left the generations past what a drop removes (its record says how many): removed here. */
async function removeLaterGenerations({ redis, keys }: RebuildRedis, target: Target, droppedLeft: string | null): Promise<void> {
  const droppedGeneration = Number(droppedLeft?.split(":")[2] ?? 0);
  for (const relation of relationsOf(target.type)) {
    for (let g = evictableGenerations + 1; g <= droppedGeneration; g++) {
      const later = keys.generationShards(relation, target, g);
      for (let i = 0; i < later.length; i += 1_000) await redis.del(...later.slice(i, i + 1_000));
    }
  }
}

/** Queues the target's keys: what a partial loss left wiped, its shards filled, its use record and its views. */
function queueTargetKeys(
  { keys }: RebuildRedis,
  pipeline: ChainableCommander,
  target: Target,
  snapshot: TargetSnapshot,
  held: readonly RelationShards[],
): void {
  // Shards a partial loss may have left behind (a hash lost alone) go first: stale members would otherwise count twice.
  pipeline.del(...recordsAndShards(keys, target, evictableGenerations));
  for (const { shards } of held) for (const [key, members] of shards) pipeline.sadd(key, ...members);
  // Loaded counts as used: it is the newest target Redis holds.
  if (keepsUseRecord(target)) pipeline.zadd(keys.use(target).key, useScore(), keys.use(target).member);
  // The views of earlier epochs the snapshot holds: late ones add only what exceeds these.
  if (snapshot.viewTotals.length > 0) {
    pipeline.hset(keys.viewsReplayed(target), ...snapshot.viewTotals.flatMap((v) => [v.epoch.toString(), String(v.total)]));
    // Outlasts the window, which opens a little after this write: a replay inside it must find what the post holds.
    pipeline.pexpire(keys.viewsReplayed(target), rebuildWindowMs + 60_000);
  }
}

/** Queues the members' notes in their indexes (a standalone Redis's), a thousand a command; how many commands. */
function queueMemberNotes({ memberIndexes }: RebuildRedis, pipeline: ChainableCommander, target: Target, held: readonly RelationShards[]): number {
  let notes = 0;
  if (!memberIndexes) return notes;
  for (const { relation, members } of held) {
    for (let i = 0; i < members.length; i += 1_000) {
      const indexes = members.slice(i, i + 1_000).map((member) => memberIndexes.key(relation, target.type, member));
      pipeline.noteMembers(indexes.length, ...indexes, target.id.toString(), memberIndexes.capacity);
      notes++;
    }
  }
  return notes;
}

/** The counter hash's fields: counts and their sequence numbers, each relation's member count and generation, a fresh epoch. */
function counterFields(target: Target, snapshot: TargetSnapshot, held: readonly RelationShards[], authorId: bigint | null): (string | number)[] {
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
  return fields;
}

/** What the replies of the write's pipeline say: the notes' before the last, then finish-rebuild's. */
function writeOutcome(replies: readonly ScriptReply[], notes: number, target: Target): RebuildWrite {
  for (const [status] of replies.slice(replies.length - 1 - notes, replies.length - 1)) {
    if (status !== ScriptStatus.Applied) throw toError("note-members", status, target);
  }
  const [status] = replies.at(-1) as ScriptReply;
  if (status === ScriptStatus.Applied || status === ScriptStatus.Unchanged) return status === ScriptStatus.Applied ? "written" : "held";
  if (status === ScriptStatus.LockLost) return "lockLost";
  throw toError("finish-rebuild", status, target);
}

export async function write(ctx: RebuildRedis, target: Target, snapshot: TargetSnapshot, authorId: bigint | null, token: string): Promise<RebuildWrite> {
  const { redis, keys } = ctx;
  const [exists, droppedLeft] = (await pipelineReplies(redis.pipeline().exists(keys.counters(target)).get(keys.dropped(target)).exec())) as [
    number,
    string | null,
  ];
  // A target Redis holds keeps its shards: the wipe below is for what a partial loss left.
  if (exists === 1) return "held";
  const held = shardsOf(ctx, target, snapshot);
  await removeLaterGenerations(ctx, target, droppedLeft);
  // One round trip, in order: the target's keys (one slot, so one pipeline works on a cluster too),
  // its members' notes in their indexes (a standalone Redis's), and last the counter hash.
  const pipeline = redis.pipeline();
  queueTargetKeys(ctx, pipeline, target, snapshot, held);
  const notes = queueMemberNotes(ctx, pipeline, target, held);
  pipeline.finishRebuild(keys.counters(target), keys.rebuildLock(target), keys.dropped(target), token, ...counterFields(target, snapshot, held, authorId));
  return writeOutcome((await pipelineReplies(pipeline.exec())) as ScriptReply[], notes, target);
}
