import type { Database } from "./database.js";
import { upsertCounters, type CounterDelta } from "./counter-sql.js";
import type { CommentRecord, Page } from "./records.js";

export interface CommentStore {
  /** Inserts the comment and counts it on its post (and parent), in one transaction. */
  create(input: { postId: bigint; authorId: bigint; parentId: bigint | null; body: string }): Promise<CommentRecord>;
  findByIds(ids: readonly bigint[]): Promise<CommentRecord[]>;
  /** Top-level comments of a post, newest first, strictly older than `beforeId` when given. */
  ofPost(postId: bigint, limit: number, beforeId: bigint | null): Promise<Page<CommentRecord>>;
  /** Replies to a comment, newest first, strictly older than `beforeId` when given. */
  repliesTo(parentId: bigint, limit: number, beforeId: bigint | null): Promise<Page<CommentRecord>>;
}

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
      const deltas: CounterDelta[] = [{ type: "post", id: input.postId, name: "comment", delta: 1 }];
      if (input.parentId !== null) deltas.push({ type: "comment", id: input.parentId, name: "reply", delta: 1 });
      const [comment] = await db.$transaction([db.comment.create({ data: input }), db.$executeRaw(upsertCounters(deltas))]);
      return comment;
    },
    findByIds: (ids) => db.comment.findMany({ where: { id: { in: [...ids] } } }),
    ofPost: (postId, limit, beforeId) => page({ postId, parentId: null }, limit, beforeId),
    repliesTo: (parentId, limit, beforeId) => page({ parentId }, limit, beforeId),
  };
}
