import type { UserStore } from "../../domain/ports/index.js";
import { prismaCode, type Database } from "./database.js";

const userFields = { id: true, username: true, email: true, createdAt: true } as const;

export function createUserStore(db: Database): UserStore {
  return {
    async create(input) {
      try {
        return { created: await db.user.create({ data: input, select: userFields }) };
      } catch (error) {
        if (prismaCode(error) !== "P2002") throw error;
        const clash = await db.user.findFirst({ where: { username: input.username }, select: { id: true } });
        return { taken: clash ? "username" : "email" };
      }
    },
    async findCredentials(username) {
      const found = await db.user.findUnique({ where: { username }, select: { ...userFields, passwordHash: true } });
      if (!found) return null;
      const { passwordHash, ...user } = found;
      return { user, passwordHash };
    },
    findByIds: (ids) => db.user.findMany({ where: { id: { in: [...ids] } }, select: userFields }),
    async idRunsAfter(after, maxIds) {
      // Gaps and islands: within consecutive ids, id minus its rank is constant, so
      // grouping by it folds a page into its runs and only the runs cross the wire.
      // The page is an index-only range scan of the primary key, bounded by LIMIT.
      const rows = await db.$queryRaw<{ first: string; last: string }[]>`
        SELECT min(id)::text AS first, max(id)::text AS last
        FROM (SELECT id, id - row_number() OVER (ORDER BY id) AS island
              FROM (SELECT id FROM users WHERE id > ${after}::bigint ORDER BY id LIMIT ${maxIds}) AS page) AS ranked
        GROUP BY island
        ORDER BY min(id)`;
      return rows.map((row) => ({ first: BigInt(row.first), last: BigInt(row.last) }));
    },
  };
}
