// The statements a reconcile pass asks PostgreSQL's truth with
// (src/stores/postgres/database-reconcile-store.ts): what derived counters should be, and
// how new each target is.
import { Prisma } from "../../generated/prisma/client.js";
import type { CounterName, TargetType } from "../../domain/model/index.js";
import { epochScale } from "../versions.js";

/**
 * What a derived counter of targets `ids` (a bigint[] expression) should be, as
 * rows (id, n) for the targets with any: each is a count of PostgreSQL's own rows.
 */
export function truthOf(type: TargetType, name: CounterName, ids: Prisma.Sql): Prisma.Sql {
  switch (`${type}.${name}`) {
    case "post.comment":
      return Prisma.sql`SELECT post_id AS id, count(*) AS n FROM comments WHERE post_id = ANY(${ids}) GROUP BY post_id`;
    case "comment.reply":
      return Prisma.sql`SELECT parent_id AS id, count(*) AS n FROM comments WHERE parent_id = ANY(${ids}) GROUP BY parent_id`;
    case "user.posts":
      return Prisma.sql`SELECT author_id AS id, count(*) AS n FROM posts WHERE author_id = ANY(${ids}) GROUP BY author_id`;
    case "user.likesReceived":
      return Prisma.sql`
        SELECT id, sum(n)::bigint AS n FROM (
          SELECT p.author_id AS id, count(*) AS n FROM posts p JOIN likes l ON l.target_type = 'post' AND l.target_id = p.id
          WHERE p.author_id = ANY(${ids}) GROUP BY p.author_id
          UNION ALL
          SELECT c.author_id, count(*) FROM comments c JOIN likes l ON l.target_type = 'comment' AND l.target_id = c.id
          WHERE c.author_id = ANY(${ids}) GROUP BY c.author_id
        ) received GROUP BY id`;
    case "user.collectsReceived":
      return Prisma.sql`
        SELECT p.author_id AS id, count(*) AS n FROM posts p JOIN collects k ON k.target_type = 'post' AND k.target_id = p.id
        WHERE p.author_id = ANY(${ids}) GROUP BY p.author_id`;
    case "user.following":
      return Prisma.sql`SELECT follower_id AS id, count(*) AS n FROM follows WHERE follower_id = ANY(${ids}) GROUP BY follower_id`;
    default:
      throw new Error(`${type}.${name} is not a derived counter.`);
  }
}

/** The newest version of each target: its newest applied change, or the start of the epoch its last rebuild opened. */
export function newestVersions(types: readonly string[], ids: readonly string[]): Prisma.Sql {
  return Prisma.sql`
    SELECT target_type, target_id::text AS target_id, max(version)::text AS version FROM (
      SELECT v.target_type, v.target_id, v.version
      FROM relation_versions v JOIN unnest(${types}::text[], ${ids}::text[]::bigint[]) AS t(target_type, target_id)
        ON v.target_type = t.target_type AND v.target_id = t.target_id
      UNION ALL
      SELECT v.target_type, v.target_id, v.version
      FROM view_totals v JOIN unnest(${types}::text[], ${ids}::text[]::bigint[]) AS t(target_type, target_id)
        ON v.target_type = t.target_type AND v.target_id = t.target_id
      UNION ALL
      SELECT e.target_type, e.target_id, e.epoch::numeric * ${epochScale.toString()}::numeric
      FROM target_epochs e JOIN unnest(${types}::text[], ${ids}::text[]::bigint[]) AS t(target_type, target_id)
        ON e.target_type = t.target_type AND e.target_id = t.target_id
    ) newest GROUP BY target_type, target_id`;
}
