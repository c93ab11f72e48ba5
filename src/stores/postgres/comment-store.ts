import type { CounterDelta } from "../../domain/model.js";
import type { CommentStore } from "../../domain/ports.js";
import type { Database } from "./database.js";
import { upsertCounters } from "./counter-sql.js";

export function createCommentStore(db: Database): CommentStore {
  const page = async (where: { postId?: bigint; parentId: bigint | null }, limit: number, beforeId: bigint | null) => {
    const rows = await db.comment.findMany({
      where: beforeId === null ? where : { ...where, id: { lt: beforeId } },
      orderBy: { id: "desc" },
      take: limit + 1,
    });
    return { items: rows.slice(0, limit), hasMore: rows.length > limit };
  };
  return {
    async create(input) {
      const deltas: CounterDelta[] = [{ target: { type: "post", id: input.postId }, name: "comment", delta: 1 }];
      if (input.parentId !== null) deltas.push({ target: { type: "comment", id: input.parentId }, name: "reply", delta: 1 });
      const [comment] = await db.$transaction([db.comment.create({ data: input }), db.$executeRaw(upsertCounters(deltas))]);
      return comment;
    },
    findByIds: (ids) => db.comment.findMany({ where: { id: { in: [...ids] } } }),
    ofPost: (postId, limit, beforeId) => page({ postId, parentId: null }, limit, beforeId),
    repliesTo: (parentId, limit, beforeId) => page({ parentId }, limit, beforeId),
  };
}
