import type { PostStore } from "../../domain/ports/index.js";
import type { Database } from "./database.js";
import { toCounterValue, upsertCounters, type CounterRow } from "./counter-sql.js";

export function createPostStore(db: Database): PostStore {
  return {
    async create({ authorId, title, body }) {
      const [row, counters] = await db.$transaction([
        db.post.create({ data: { authorId, title, body } }),
        db.$queryRaw<CounterRow[]>(upsertCounters([{ target: { type: "user", id: authorId }, name: "posts", delta: 1 }])),
      ]);
      return { row, counters: counters.map(toCounterValue) };
    },
    findByIds: (ids) => db.post.findMany({ where: { id: { in: [...ids] } } }),
    async feed(limit, beforeId) {
      const rows = await db.post.findMany({
        where: beforeId === null ? {} : { id: { lt: beforeId } },
        orderBy: { id: "desc" },
        take: limit + 1,
      });
      return { items: rows.slice(0, limit), hasMore: rows.length > limit };
    },
  };
}
