import type { Target } from "../../domain/targets.js";
import type { Database } from "./database.js";

export interface PersistedSnapshot {
  readonly members: bigint[];
  readonly counts: Record<string, number>;
  /** Highest like-change version applied to the target (0 when none). */
  readonly version: bigint;
}

export interface SnapshotStore {
  /** A target's likers, counters and applied version, as PostgreSQL holds them now. */
  read(target: Target): Promise<PersistedSnapshot>;
}

export function createSnapshotStore(db: Database): SnapshotStore {
  return {
    async read(target) {
      const [members, counters, version] = await Promise.all([
        // One aggregated string rather than a row object per liker: a hot target has tens of thousands.
        target.type === "user"
          ? Promise.resolve([{ users: null }])
          : db.$queryRaw<{ users: string | null }[]>`SELECT string_agg(user_id::text, ',') AS users FROM likes WHERE target_type = ${target.type} AND target_id = ${target.id}`,
        db.counter.findMany({ where: { targetType: target.type, targetId: target.id } }),
        db.$queryRaw<{ v: string }[]>`SELECT COALESCE(max(version), 0)::text AS v FROM like_versions WHERE target_type = ${target.type} AND target_id = ${target.id}`,
      ]);
      return {
        members: members[0]?.users ? members[0].users.split(",").map(BigInt) : [],
        counts: Object.fromEntries(counters.map((c) => [c.name, Number(c.value)])),
        version: BigInt(version[0]?.v ?? "0"),
      };
    },
  };
}
