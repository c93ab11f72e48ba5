import type { UserStore } from "../../domain/ports.js";
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
  };
}
