import { Prisma } from "../../generated/prisma/client.js";
import type { SnapshotStore } from "../../domain/ports.js";
import type { Database } from "./database.js";

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
    changesSince: (target, version) =>
      db.likeVersion.findMany({
        where: { targetType: target.type, targetId: target.id, version: { gt: version } },
        select: { userId: true, liked: true, version: true },
      }),
  };
}
