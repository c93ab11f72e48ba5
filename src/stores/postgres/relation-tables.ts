// Where each relation's members live in PostgreSQL: likes and collects as
// (target_type, target_id, user_id), follows as (followee_id, follower_id) with
// the followed user as the target. Every statement over a relation's rows is
// built from these column expressions, so no query names a table by hand.
import { Prisma } from "../../generated/prisma/client.js";
import type { Relation } from "../../domain/model/index.js";

export interface RelationTable {
  /** The table, to name with an alias (`FROM ${table} l`, `INSERT INTO ${table} AS l`). */
  readonly table: Prisma.Sql;
  /** The target type of a row of alias `a`: a column, or a constant for tables of one type. */
  targetType(a: string): Prisma.Sql;
  targetId(a: string): Prisma.Sql;
  userId(a: string): Prisma.Sql;
  /** Inserts rows from unnest(types, ids, users, times) as k(target_type, target_id, user_id, created_at). */
  readonly insertColumns: Prisma.Sql;
  readonly insertValues: Prisma.Sql;
}

const byTargetAndUser = (table: string): RelationTable => ({
  table: Prisma.raw(table),
  targetType: (a) => Prisma.raw(`${a}.target_type`),
  targetId: (a) => Prisma.raw(`${a}.target_id`),
  userId: (a) => Prisma.raw(`${a}.user_id`),
  insertColumns: Prisma.raw("target_type, target_id, user_id, created_at"),
  insertValues: Prisma.raw("k.target_type, k.target_id, k.user_id, k.created_at"),
});

export const relationTables: Readonly<Record<Relation, RelationTable>> = {
  like: byTargetAndUser("likes"),
  collect: byTargetAndUser("collects"),
  follow: {
    table: Prisma.raw("follows"),
    targetType: () => Prisma.raw("'user'::text"),
    targetId: (a) => Prisma.raw(`${a}.followee_id`),
    userId: (a) => Prisma.raw(`${a}.follower_id`),
    insertColumns: Prisma.raw("followee_id, follower_id, created_at"),
    insertValues: Prisma.raw("k.target_id, k.user_id, k.created_at"),
  },
};
