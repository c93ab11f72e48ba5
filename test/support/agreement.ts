// Compares what Redis and PostgreSQL hold for a set of targets: members and like counts.
import type { LikeableTarget } from "../../src/domain/model.js";
import type { Database } from "../../src/stores/postgres/database.js";
import type { RedisClient } from "../../src/stores/redis/client.js";
import { createRedisKeys } from "../../src/stores/redis/keys.js";
import { createRedisReconcileStore } from "../../src/stores/redis/reconcile-store.js";

export interface TargetState {
  readonly members: string[];
  readonly count: number;
}

export async function redisState(redis: RedisClient, partitions: number, targets: readonly LikeableTarget[]): Promise<TargetState[]> {
  const inspected = await createRedisReconcileStore(redis, createRedisKeys(partitions)).inspect(targets);
  return inspected.map((t) => ({ members: (t?.members ?? []).map(String).sort(), count: t?.count ?? 0 }));
}

export async function databaseState(db: Database, targets: readonly LikeableTarget[]): Promise<TargetState[]> {
  return Promise.all(
    targets.map(async (t) => {
      const rows = await db.like.findMany({ where: { targetType: t.type, targetId: t.id }, select: { userId: true } });
      const counter = await db.counter.findUnique({
        where: { targetType_targetId_name: { targetType: t.type, targetId: t.id, name: "like" } },
      });
      return { members: rows.map((r) => r.userId.toString()).sort(), count: Number(counter?.value ?? 0n) };
    }),
  );
}

/** Null when both stores agree on every target, else a description of the first difference. */
export async function disagreement(redis: RedisClient, db: Database, partitions: number, targets: readonly LikeableTarget[]): Promise<string | null> {
  const [inRedis, inDatabase] = await Promise.all([redisState(redis, partitions, targets), databaseState(db, targets)]);
  for (const [i, t] of targets.entries()) {
    const r = inRedis[i] as TargetState;
    const d = inDatabase[i] as TargetState;
    const missing = r.members.filter((m) => !d.members.includes(m));
    const extra = d.members.filter((m) => !r.members.includes(m));
    if (missing.length || extra.length || r.count !== d.count || d.count !== d.members.length) {
      return `${t.type} ${t.id}: Redis count ${r.count} with ${r.members.length} members; PostgreSQL count ${d.count} with ${d.members.length} rows; ${missing.length} missing in PostgreSQL, ${extra.length} extra`;
    }
  }
  return null;
}
