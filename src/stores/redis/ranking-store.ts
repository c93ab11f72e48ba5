// The hot ranking in Redis (keys.ts, "hot:{hot}:…"): a sorted set per time bucket
// and for ALL, written by mirror-ranking.lua from what PostgreSQL committed, and a
// sorted set per window that refresh-ranking.lua sums from its buckets.
import {
  bucketedWindowNames,
  bucketedWindows,
  bucketLeavesAt,
  keptBuckets,
  rankingCapacity,
  windowBuckets,
  type BucketSpan,
} from "../../domain/model/index.js";
import type { RankingStore } from "../../domain/ports/index.js";
import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";
import { ScriptStatus, ScriptReplyError } from "./statuses.js";

/** A post id as a ranking's member: 20 digits, so members of equal score sort by id. */
export const rankingMember = (postId: bigint): string => postId.toString().padStart(20, "0");

/** A bucket stays a while after it left its window, so a refresh running late still finds it. */
const expiryMarginMs = 60_000;

export function createRankingStore(redis: RedisClient, keys: RedisKeys, capacity = rankingCapacity): RankingStore {
  const k = keys.ranking;
  const mirrorOne = async (ranking: string, seqs: string, expireAtMs: number, triples: (string | number)[]) => {
    const [status] = await redis.mirrorRanking(ranking, seqs, capacity, expireAtMs, ...triples);
    if (status !== ScriptStatus.Applied) throw new ScriptReplyError("mirror-ranking", status, ranking);
  };
  return {
    async top(window, limit) {
      const key = window === "ALL" ? k.all.ranking : k.window(window);
      const members = await redis.zrevrange(key, 0, limit - 1);
      return members.map((m) => BigInt(m));
    },
    async mirror(ranked, nowMs) {
      const byBucket = new Map<string, { span: BucketSpan; startMs: number; triples: (string | number)[] }>();
      const live = keptBuckets(nowMs);
      for (const b of ranked.buckets) {
        if (!live.get(b.span)?.has(b.startMs)) continue;
        const key = `${b.span}:${b.startMs}`;
        let entry = byBucket.get(key);
        if (!entry) byBucket.set(key, (entry = { span: b.span, startMs: b.startMs, triples: [] }));
        entry.triples.push(rankingMember(b.postId), b.likes, b.seq.toString());
      }
      const totals = ranked.totals.flatMap((t) => [rankingMember(t.target.id), t.value, t.seq.toString()]);
      await Promise.all([
        ...[...byBucket.values()].map(({ span, startMs, triples }) => {
          const { ranking, seqs } = k.bucket(span, startMs);
          return mirrorOne(ranking, seqs, bucketLeavesAt(span, startMs) + expiryMarginMs, triples);
        }),
        totals.length ? mirrorOne(k.all.ranking, k.all.seqs, 0, totals) : undefined,
      ]);
    },
    async refresh(nowMs) {
      const buckets = bucketedWindowNames.map((w) => windowBuckets(w, nowMs).map((start) => k.bucket(bucketedWindows[w].span, start).ranking));
      const keysOf = [k.ready, ...bucketedWindowNames.map((w) => k.window(w)), ...buckets.flat()];
      const [status] = await redis.refreshRanking(keysOf.length, ...keysOf, capacity, ...buckets.map((b) => b.length));
      if (status === ScriptStatus.Applied) return "refreshed";
      if (status === ScriptStatus.TargetAbsent) return "missing";
      throw new ScriptReplyError("refresh-ranking", status, "the hot ranking");
    },
    async markRebuilt() {
      await redis.set(k.ready, String(Date.now()));
    },
  };
}
