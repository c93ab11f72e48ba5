import type { Database } from "./database.js";
import { prismaCode } from "./database.js";
import type { UserCredentials, UserRecord } from "./records.js";

const recordFields = { id: true, username: true, email: true, createdAt: true } as const;

export type NewUserOutcome = { created: UserRecord } | { taken: "username" | "email" };

export interface UserStore {
  create(input: { username: string; email: string; passwordHash: string }): Promise<NewUserOutcome>;
  findCredentials(username: string): Promise<UserCredentials | null>;
  findByIds(ids: readonly bigint[]): Promise<UserRecord[]>;
}

export function createUserStore(db: Database): UserStore {
  return {
    async create(input) {
      try {
        return { created: await db.user.create({ data: input, select: recordFields }) };
      } catch (error) {
        if (prismaCode(error) !== "P2002") throw error;
        const clash = await db.user.findFirst({ where: { username: input.username }, select: { id: true } });
        return { taken: clash ? "username" : "email" };
      }
    },
    findCredentials: (username) =>
      db.user.findUnique({ where: { username }, select: { ...recordFields, passwordHash: true } }),
    findByIds: (ids) => db.user.findMany({ where: { id: { in: [...ids] } }, select: recordFields }),
  };
}
