import { Prisma } from "../../generated/prisma/client.js";
import type { Comment, CounterDelta, Page } from "../../domain/model/index.js";
import type { CommentStore, PageRequest } from "../../domain/ports/index.js";
import type { Database } from "./database.js";
import { toCounterValue, upsertCounters, type CounterRow } from "./counter-sql.js";

interface PageRow {
  ord: number;
  id: string;
  post_id: string;
  author_id: string;
  parent_id: string | null;
  body: string;
  created_at: Date;
}

/** Above every id a bigint column holds: "no cursor" as an upper bound, so one plan serves both. */
const noUpperBound = (2n ** 63n - 1n).toString();

/** What makes a comment a child of parent `k`: a post's top-level comments, or a comment's replies. */
const children = {
  post: Prisma.sql`c.post_id = k.parent_id AND c.parent_id IS NULL`,
  comment: Prisma.sql`c.parent_id = k.parent_id`,
} as const;

export function createCommentStore(db: Database): CommentStore {
  /**
   * Every parent's page in one statement: a LATERAL subquery per parent walks its
   * (post_id, id) or (parent_id, id) index backwards from its own cursor and stops
   * after limit + 1 rows, the one past the page telling whether more follow.
   */
  const pages = async (of: keyof typeof children, requests: readonly PageRequest[]): Promise<Page<Comment>[]> => {
    if (requests.length === 0) return [];
    const rows = await db.$queryRaw<PageRow[]>`
      SELECT k.ord::int AS ord, c.id::text AS id, c.post_id::text AS post_id, c.author_id::text AS author_id,
             c.parent_id::text AS parent_id, c.body, c.created_at
      FROM unnest(
        ${requests.map((r) => r.parentId.toString())}::text[]::bigint[],
        ${requests.map((r) => (r.beforeId === null ? noUpperBound : (r.beforeId - 1n).toString()))}::text[]::bigint[],
        ${requests.map((r) => r.limit)}::int[]
      ) WITH ORDINALITY AS k(parent_id, upto_id, lim, ord)
      CROSS JOIN LATERAL (
        SELECT * FROM comments c
        WHERE ${children[of]} AND c.id <= k.upto_id
        ORDER BY c.id DESC
        LIMIT k.lim + 1
      ) c
      ORDER BY k.ord, c.id DESC`;
    const found: Comment[][] = requests.map(() => []);
    for (const row of rows) {
      found[row.ord - 1]?.push({
        id: BigInt(row.id),
        postId: BigInt(row.post_id),
        authorId: BigInt(row.author_id),
        parentId: row.parent_id === null ? null : BigInt(row.parent_id),
        body: row.body,
        createdAt: row.created_at,
      });
    }
    return requests.map((r, i) => {
      const items = found[i] as Comment[];
      return { items: items.slice(0, r.limit), hasMore: items.length > r.limit };
    });
  };
  return {
    async create(input) {
      const deltas: CounterDelta[] = [{ target: { type: "post", id: input.postId }, name: "comment", delta: 1 }];
      if (input.parentId !== null) deltas.push({ target: { type: "comment", id: input.parentId }, name: "reply", delta: 1 });
      const [row, counters] = await db.$transaction([db.comment.create({ data: input }), db.$queryRaw<CounterRow[]>(upsertCounters(deltas))]);
      return { row, counters: counters.map(toCounterValue) };
    },
    findByIds: (ids) => db.comment.findMany({ where: { id: { in: [...ids] } } }),
    ofPosts: (requests) => pages("post", requests),
    repliesTo: (requests) => pages("comment", requests),
  };
}
