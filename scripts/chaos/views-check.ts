// After a case has settled: the hot post's views in Redis and PostgreSQL, read
// straight from the stores, against what the load's viewers were answered.
import type pg from "pg";
import { createRedisKeys } from "../../src/stores/redis/keys.js";
import type { RedisClient } from "./check.js";
import type { ViewReports } from "./load.js";

/** How many acknowledged views of the hot post a case may lose. */
export type ViewsAllowance =
  | { readonly kind: "none" }
  /** An API process killed at `killMs` loses the views it held since its last flush: those answered within `windowMs` before. */
  | { readonly kind: "flushWindow"; readonly killMs: number; readonly windowMs: number }
  /** Redis without persistence loses what its outbox held: any number. */
  | { readonly kind: "any" };

export interface ViewsVerdict {
  /** Views answered counted. */
  readonly acknowledged: number;
  /** Views in reports that got no answer: each may have counted or not. */
  readonly unanswered: number;
  /** Views the hot post holds: Redis's where it holds the post, else PostgreSQL's. */
  readonly counted: number;
  /** Acknowledged views the post does not hold. */
  readonly lost: number;
  /** Of them, how many the case allows. */
  readonly allowedLost: number;
  /** Views counted beyond every view sent that may have counted. */
  readonly doubled: number;
  readonly drift: string | null;
}

/** The hot post's views in Redis and PostgreSQL, against the load's reports. */
export async function verifyViews(
  redis: RedisClient,
  partitions: number,
  sql: pg.Client,
  hotPostId: string,
  reports: ViewReports,
  allowance: ViewsAllowance,
): Promise<ViewsVerdict> {
  const hash = await redis.hgetall(createRedisKeys(partitions).counters({ type: "post", id: BigInt(hotPostId) }));
  const held = Object.keys(hash).length > 0;
  const row = await sql.query<{ value: string }>("SELECT value::text FROM counters WHERE target_type = 'post' AND target_id = $1 AND name = 'read'", [
    hotPostId,
  ]);
  const inDatabase = Number(row.rows[0]?.value ?? 0);
  const counted = held ? Number(hash.read ?? 0) : inDatabase;
  const acknowledged = reports.acknowledged.reduce((n, r) => n + r.views, 0);
  const lost = Math.max(0, acknowledged - counted);
  const allowedLost =
    allowance.kind === "any"
      ? lost
      : allowance.kind === "flushWindow"
        ? reports.acknowledged.filter((r) => r.endMs > allowance.killMs - allowance.windowMs && r.endMs <= allowance.killMs).reduce((n, r) => n + r.views, 0)
        : 0;
  return {
    acknowledged,
    unanswered: reports.unanswered,
    counted,
    lost,
    allowedLost,
    doubled: Math.max(0, counted - acknowledged - reports.unanswered),
    drift: held && counted !== inDatabase ? `hot post ${hotPostId}: Redis holds ${counted} views, PostgreSQL ${inDatabase}` : null,
  };
}
