import { Prisma } from "../../generated/prisma/client.js";
import type { Target } from "../../domain/targets.js";
import type { Database } from "./database.js";

export interface PersistedSnapshot {
  readonly members: bigint[];
  readonly counts: Record<string, number>;
  /** Highest like-change version applied to the target (0 when none). */
  readonly version: bigint;
}

export interface AppliedChange {
  readonly userId: bigint;
  readonly liked: boolean;
  readonly version: bigint;
}

export interface SnapshotStore {
  /** A target's likers, counters and applied version, as of one moment. */
  read(target: Target): Promise<PersistedSnapshot>;
  /** The last applied change of each user whose change is newer than `version`. */
  changesSince(target: Target, version: bigint): Promise<AppliedChange[]>;
}

export function createSnapshotStore(db: Database): SnapshotStore {
  return {
    read(target) {
      // One snapshot: members, counters and version must describe the same moment.
      return db.$transaction(
        async (tx) => {
          // One aggregated string rather than a row object per liker: a hot target has tens of thousands.
          const [members] =
            target.type === "user"
              ? [{ users: null }]
              : await tx.$queryRaw<{ users: string | null }[]>`SELECT string_agg(user_id::text, ',') AS users FROM likes WHERE target_type = ${target.type} AND target_id = ${target.id}`;
          const counters = await tx.counter.findMany({ where: { targetType: target.type, targetId: target.id } });
          const [version] = await tx.$queryRaw<{ v: string }[]>`SELECT COALESCE(max(version), 0)::text AS v FROM like_versions WHERE target_type = ${target.type} AND target_id = ${target.id}`;
          return {
            members: members?.users ? members.users.split(",").map(BigInt) : [],
            counts: Object.fromEntries(counters.map((c) => [c.name, Number(c.value)])),
            version: BigInt(version?.v ?? "0"),
          };
        },
        { isolationLevel: Prisma.TransactionIsolationLevel.RepeatableRead },
      );
    },
    async changesSince(target, version) {
      const rows = await db.likeVersion.findMany({
        where: { targetType: target.type, targetId: target.id, version: { gt: version } },
        select: { userId: true, liked: true, version: true },
      });
      return rows;
    },
  };
}
