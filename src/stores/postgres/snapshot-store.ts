import { Prisma } from "../../generated/prisma/client.js";
import type { SnapshotStore } from "../../domain/ports.js";
import { epochScale } from "../versions.js";
import type { Database } from "./database.js";

export function createSnapshotStore(db: Database): SnapshotStore {
  return {
    read(target) {
      // One snapshot: members, counters and version must describe the same moment.
      return db.$transaction(
        async (tx) => {
          // The transaction's snapshot, taken by its first statement: what it sees is exactly
          // what committed before, so changesSince can name what it does not see.
          const [{ mark } = { mark: "" }] = await tx.$queryRaw<{ mark: string }[]>`SELECT pg_current_snapshot()::text AS mark`;
          // One aggregated string rather than a row object per liker: a hot target has tens of thousands.
          const [members] =
            target.type === "user"
              ? [{ users: null }]
              : await tx.$queryRaw<{ users: string | null }[]>`SELECT string_agg(user_id::text, ',') AS users FROM likes WHERE target_type = ${target.type} AND target_id = ${target.id}`;
          const counters = await tx.counter.findMany({ where: { targetType: target.type, targetId: target.id } });
          const [version] = await tx.$queryRaw<{ v: string }[]>`SELECT COALESCE(max(version), 0)::text AS v FROM like_versions WHERE target_type = ${target.type} AND target_id = ${target.id}`;
          const applied = BigInt(version?.v ?? "0");
          // A new epoch, above every epoch a version PostgreSQL holds was stamped in
          // (changes still in flight carry at most the previous one).
          const [epoch] = await tx.$queryRaw<{ epoch: string }[]>`
            INSERT INTO target_epochs (target_type, target_id, epoch)
            VALUES (${target.type}, ${target.id}, ${(applied / epochScale + 1n).toString()}::bigint)
            ON CONFLICT (target_type, target_id) DO UPDATE
              SET epoch = GREATEST(target_epochs.epoch + 1, EXCLUDED.epoch)
            RETURNING epoch::text`;
          return {
            members: members?.users ? members.users.split(",").map(BigInt) : [],
            counts: Object.fromEntries(counters.map((c) => [c.name, Number(c.value)])),
            version: applied,
            epoch: BigInt(epoch?.epoch ?? "1"),
            mark,
          };
        },
        { isolationLevel: Prisma.TransactionIsolationLevel.RepeatableRead },
      );
    },
    async changesSince(target, mark) {
      // By commit, not by version: two persist transactions commit in either order, so a
      // change older than the snapshot's newest version may still have committed after it.
      // Rows written before txid was recorded predate every snapshot still in use.
      const rows = await db.$queryRaw<{ user_id: string; liked: boolean; version: string }[]>`
        SELECT user_id::text, liked, version::text FROM like_versions
        WHERE target_type = ${target.type} AND target_id = ${target.id}
          AND txid IS NOT NULL AND NOT pg_visible_in_snapshot(txid::text::xid8, ${mark}::pg_snapshot)`;
      return rows.map((r) => ({ userId: BigInt(r.user_id), liked: r.liked, version: BigInt(r.version) }));
    },
    sawCommit,
    async newestVersion(target) {
      const [newest] = await db.$queryRaw<{ v: string }[]>`
        SELECT GREATEST(
          (SELECT COALESCE(max(version), 0) FROM like_versions WHERE target_type = ${target.type} AND target_id = ${target.id}),
          (SELECT COALESCE(max(epoch), 0)::numeric * ${epochScale.toString()}::numeric FROM target_epochs WHERE target_type = ${target.type} AND target_id = ${target.id})
        )::text AS v`;
      return BigInt(newest?.v ?? "0");
    },
  };
}

/**
 * Whether transaction `txid` had committed when the snapshot `mark` was taken:
 * pg_visible_in_snapshot's rule, on the text form of a pg_snapshot
 * ('xmin:xmax:xip,…'), so a caller can ask it of many changes without a query.
 */
export function sawCommit(mark: string, txid: bigint): boolean {
  const [xmin, xmax, xip = ""] = mark.split(":");
  if (xmin === undefined || xmax === undefined) return false;
  if (txid < BigInt(xmin)) return true;
  if (txid >= BigInt(xmax)) return false;
  return !xip.split(",").filter(Boolean).map(BigInt).includes(txid);
}
