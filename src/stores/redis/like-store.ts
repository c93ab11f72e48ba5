import type { LikeableTarget } from "../../domain/model.js";
import type { LikeStore, MembershipChange } from "../../domain/ports.js";
import { Cluster } from "ioredis";
import { batchRead, inTickPipeline, type RedisClient } from "./client.js";
import { parseCounterHash } from "./counter-hash.js";
import { defaultShardCapacity, generationField, type RedisKeys } from "./keys.js";
import type { MembershipReply } from "./scripts.js";
import { ScriptStatus, toError } from "./statuses.js";

/** The one place the like and unlike scripts' replies become results or errors. */
function toChange(script: string, [status, counters]: MembershipReply, target: LikeableTarget): MembershipChange {
  switch (status) {
    case ScriptStatus.Applied:
    case ScriptStatus.Unchanged:
      return { kind: "applied", changed: status === ScriptStatus.Applied, counts: parseCounterHash(counters ?? []).counts };
    case ScriptStatus.TargetAbsent:
      return { kind: "unloaded" };
    default:
      throw toError(script, status, target);
  }
}

type MembershipScript = "likeTarget" | "unlikeTarget";
type ScriptArgs = [counters: string, ...keysAndArgs: (string | number)[]];

export function createLikeStore(redis: RedisClient, keys: RedisKeys, shardCapacity = defaultShardCapacity): LikeStore {
  /**
   * On a standalone Redis a script call goes in the pipeline of the current tick:
   * likes arriving together share one socket write, which was a tenth of a like's
   * CPU when each went alone. A cluster routes each call to its node itself.
   */
  async function run(script: MembershipScript, args: ScriptArgs): Promise<MembershipReply> {
    if (redis instanceof Cluster) return redis[script](...args);
    const [reply] = await inTickPipeline(redis, (pipeline) => void pipeline[script](...args));
    return reply as MembershipReply;
  }

  const keysOf = (target: LikeableTarget, userId: bigint): ScriptArgs => [keys.counters(target), keys.outbox(target), keys.touched(target), keys.receipt(target), ...keys.memberShards(target, userId)];

  return {
    async like(target, userId) {
      const reply = await run("likeTarget", [...keysOf(target, userId), userId.toString(), shardCapacity, "like", target.type, target.id.toString()]);
      return toChange("like", reply, target);
    },
    async unlike(target, userId) {
      const reply = await run("unlikeTarget", [...keysOf(target, userId), userId.toString(), "like", target.type, target.id.toString()]);
      return toChange("unlike", reply, target);
    },
    /**
     * Looks in generation 0 of every target, and reads how far each has grown,
     * in one round trip; only targets past their first generation that do not
     * have the user there cost a second one.
     */
    async hasLiked(targets, userId) {
      const member = userId.toString();
      const [inFirst, generations] = await Promise.all([
        batchRead(redis, "sismember", targets.map((t) => [keys.memberShard(t, userId, 0), member] as const)),
        batchRead(redis, "hget", targets.map((t) => [keys.counters(t), generationField] as const)),
      ]);
      const liked = inFirst.map((reply) => reply === 1);
      const later: { index: number; key: string }[] = [];
      targets.forEach((target, index) => {
        const newest = liked[index] ? 0 : Number(generations[index] ?? 0);
        for (let g = 1; g <= newest; g++) later.push({ index, key: keys.memberShard(target, userId, g) });
      });
      const replies = await batchRead(redis, "sismember", later.map((l) => [l.key, member] as const));
      replies.forEach((reply, i) => {
        if (reply === 1) liked[(later[i] as { index: number }).index] = true;
      });
      return liked;
    },
  };
}
