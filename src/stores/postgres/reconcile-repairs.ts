// The repairs a reconcile pass makes in PostgreSQL, each in a transaction of its own.
import { Prisma } from "../../generated/prisma/client.js";
import { relations, type CounterValue, type Repair } from "../../domain/model/index.js";
import type { Database } from "./database.js";
import { lockCounterRow, recountDerived, recountRelation } from "./counter-recounts.js";
import { newestVersions } from "./reconcile-truth.js";
import { relationTables } from "./relation-tables.js";

/** The repairs PostgreSQL takes; the others are Redis's. */
export type DatabaseRepair = Exclude<Repair, { kind: "recountRedis" | "mirrorDerived" }>;

export async function repair(db: Database, repair: DatabaseRepair): Promise<CounterValue[]> {
  switch (repair.kind) {
    case "recountDatabase":
      await db.$transaction((tx) => recountRelation(tx, repair));
      return [];
    case "recountDerived":
      return db.$transaction((tx) => recountDerived(tx, repair.target, repair.names));
    case "alignViews":
      await db.$transaction(async (tx) => {
        // Views that reached PostgreSQL since the comparison make the repair stale: the next pass compares again.
        await lockCounterRow(tx, repair.target, "read");
        const [newest] = await tx.$queryRaw<{ version: string }[]>(newestVersions([repair.target.type], [repair.target.id.toString()]));
        if (BigInt(newest?.version ?? "0") !== repair.observedVersion) return;
        await tx.$executeRaw`
          UPDATE counters SET value = ${repair.views}, seq = seq + 1
          WHERE target_type = ${repair.target.type} AND target_id = ${repair.target.id} AND name = 'read'`;
      });
      return [];
    case "alignDatabase":
      return db.$transaction(async (tx) => {
        const { relation, target } = repair;
        const t = relationTables[relation];
        const name = relations[relation].counter;
        await lockCounterRow(tx, target, name, { create: false });
        // Records the repaired state for these users, except where a pair's version moved
        // past the observed one (it changed after the comparison): returns the users that passed.
        const gate = (users: readonly bigint[], member: boolean) => Prisma.sql`
          INSERT INTO relation_versions (target_type, target_id, relation, user_id, version, member, txid)
          SELECT ${target.type}, ${target.id}, ${relation}, u, ${repair.observedVersion.toString()}::numeric, ${member}, pg_current_xact_id()::text::bigint
          FROM unnest(${users.map(String)}::text[]::bigint[]) AS u
          ON CONFLICT (target_type, target_id, relation, user_id) DO UPDATE SET version = EXCLUDED.version, member = EXCLUDED.member, txid = EXCLUDED.txid
            WHERE relation_versions.version <= EXCLUDED.version
          RETURNING user_id`;
        const added = await tx.$queryRaw<{ user_id: string }[]>`
          WITH passed AS (${gate(repair.add, true)})
          INSERT INTO ${t.table} AS l (${t.insertColumns})
          SELECT ${t.insertValues} FROM (SELECT ${target.type}::text AS target_type, ${target.id}::bigint AS target_id, user_id, now() AS created_at FROM passed) k
          ON CONFLICT DO NOTHING
          RETURNING ${t.userId("l")}::text AS user_id`;
        const removed = await tx.$queryRaw<{ user_id: string }[]>`
          WITH passed AS (${gate(repair.remove, false)})
          DELETE FROM ${t.table} l WHERE ${t.targetType("l")} = ${target.type} AND ${t.targetId("l")} = ${target.id}
            AND ${t.userId("l")} IN (SELECT user_id FROM passed)
          RETURNING ${t.userId("l")}::text AS user_id`;
        await recountRelation(tx, repair);
        // Whom the moved rows credit: the target's author, or each moved follower.
        const { credit } = relations[relation];
        const credited =
          credit.to === "member"
            ? [...added, ...removed].map((r) => BigInt(r.user_id))
            : added.length + removed.length > 0
              ? (
                  await tx.$queryRaw<{ author_id: string }[]>`
                  SELECT author_id::text FROM ${Prisma.raw(target.type === "post" ? "posts" : "comments")} WHERE id = ${target.id}`
                ).map((r) => BigInt(r.author_id))
              : [];
        const values: CounterValue[] = [];
        const inLockOrder = [...new Set(credited)].sort((a, b) => `user:${a}`.localeCompare(`user:${b}`));
        for (const user of inLockOrder) values.push(...(await recountDerived(tx, { type: "user", id: user }, [credit.name])));
        return values;
      });
  }
}
