// Compares what Redis and PostgreSQL hold for a set of targets: members of one relation and its counts.
import { relations, type Relation, type Target } from "../../src/domain/model/index.js";
import type { Database } from "../../src/stores/postgres/database.js";
import type { RedisClient } from "../../src/stores/redis/client.js";
import { createRedisKeys } from "../../src/stores/redis/keys.js";
import { createRedisReconcileStore } from "../../src/stores/redis/redis-reconcile-store.js";

export interface TargetState {
  readonly members: string[];
  readonly count: number;
}

export async function redisState(redis: RedisClient, partitions: number, targets: readonly Target[], relation: Relation = "like"): Promise<TargetState[]> {
  const inspected = await createRedisReconcileStore(redis, createRedisKeys(partitions)).inspect(targets.map((target) => ({ relation, target })));
  return inspected.map((t) => ({ members: (t?.members ?? []).map(String).sort(), count: t?.count ?? 0 }));
}

/** The members PostgreSQL holds of each target's relation, read from its table. */
export async function databaseMembers(db: Database, target: Target, relation: Relation): Promise<string[]> {
  const rows =
    relation === "follow"
      ? (await db.follow.findMany({ where: { followeeId: target.id }, select: { followerId: true } })).map((r) => r.followerId)
      : relation === "collect"
        ? (await db.collect.findMany({ where: { targetType: target.type, targetId: target.id }, select: { userId: true } })).map((r) => r.userId)
        : (await db.like.findMany({ where: { targetType: target.type, targetId: target.id }, select: { userId: true } })).map((r) => r.userId);
  return rows.map(String).sort();
}

export async function databaseState(db: Database, targets: readonly Target[], relation: Relation = "like"): Promise<TargetState[]> {
  return Promise.all(
    targets.map(async (t) => {
      const counter = await db.counter.findUnique({
        where: { targetType_targetId_name: { targetType: t.type, targetId: t.id, name: relations[relation].counter } },
      });
      return { members: await databaseMembers(db, t, relation), count: Number(counter?.value ?? 0n) };
    }),
  );
}

/** Null when both stores agree on every target's relation, else a description of the first difference. */
export async function disagreement(
  redis: RedisClient,
  db: Database,
  partitions: number,
  targets: readonly Target[],
  relation: Relation = "like",
): Promise<string | null> {
  const [inRedis, inDatabase] = await Promise.all([redisState(redis, partitions, targets, relation), databaseState(db, targets, relation)]);
  for (const [i, t] of targets.entries()) {
    const r = inRedis[i] as TargetState;
    const d = inDatabase[i] as TargetState;
    const missing = r.members.filter((m) => !d.members.includes(m));
    const extra = d.members.filter((m) => !r.members.includes(m));
    if (missing.length || extra.length || r.count !== d.count || d.count !== d.members.length) {
      return `${relation} of ${t.type} ${t.id}: Redis count ${r.count} with ${r.members.length} members; PostgreSQL count ${d.count} with ${d.members.length} rows; ${missing.length} missing in PostgreSQL, ${extra.length} extra`;
    }
  }
  return null;
}
