// Posts and comments: validated input in, rows out; their counters start in Redis at creation.
import { badInput, notFound } from "../errors.js";
import type { CounterService } from "./counters.js";
import type { Comment, Page, Post } from "./model/index.js";
import type { CommentStore, PageRequest, PostStore } from "./ports/index.js";
import { checkPlainText } from "./text.js";

export const limits = {
  titleLength: 200,
  postBodyLength: 20_000,
  commentBodyLength: 5_000,
} as const;

function text(field: string, value: string, max: number): string {
  // Bodies are multi-line; a title is one line.
  checkPlainText(field, value, { multiline: field === "body" });
  const trimmed = value.trim();
  if (trimmed.length === 0) throw badInput(field, `${field} must not be empty.`);
  if (trimmed.length > max) throw badInput(field, `${field} must be at most ${max} characters; got ${trimmed.length}.`);
  return trimmed;
}

export interface ContentService {
  createPost(authorId: bigint, title: string, body: string): Promise<Post>;
  createComment(authorId: bigint, postId: bigint, body: string, parentId: bigint | null): Promise<Comment>;
  feed(limit: number, beforeId: bigint | null): Promise<Page<Post>>;
  /** Top-level comments of posts, a page per request in order, with one query for them all. */
  commentsOf(requests: readonly PageRequest[]): Promise<Page<Comment>[]>;
  /** Replies to comments, a page per request in order, with one query for them all. */
  repliesTo(requests: readonly PageRequest[]): Promise<Page<Comment>[]>;
}

export interface ContentServiceDeps {
  readonly posts: PostStore;
  readonly comments: CommentStore;
  readonly counters: CounterService;
  readonly findPost: (id: bigint) => Promise<Post | null>;
  readonly findComment: (id: bigint) => Promise<Comment | null>;
}

export function createContentService(deps: ContentServiceDeps): ContentService {
  const { posts, comments, counters } = deps;
  return {
    async createPost(authorId, title, body) {
      const created = await posts.create({
        authorId,
        title: text("title", title, limits.titleLength),
        body: text("body", body, limits.postBodyLength),
      });
      await counters.initNew({ type: "post", id: created.row.id }, authorId);
      await counters.mirror(created.counters);
      return created.row;
    },
    async createComment(authorId, postId, body, parentId) {
      const checkedBody = text("body", body, limits.commentBodyLength);
      if (!(await deps.findPost(postId))) throw notFound("post", postId);
      if (parentId !== null) {
        const parent = await deps.findComment(parentId);
        if (!parent) throw notFound("comment", parentId);
        if (parent.postId !== postId) {
          throw badInput("parentId", `Comment ${parentId} belongs to post ${parent.postId}, not to post ${postId}; reply under the same post.`);
        }
      }
      const created = await comments.create({ postId, authorId, parentId, body: checkedBody });
      await counters.initNew({ type: "comment", id: created.row.id }, authorId);
      await counters.mirror(created.counters);
      return created.row;
    },
    feed: (limit, beforeId) => posts.feed(limit, beforeId),
    commentsOf: (requests) => comments.ofPosts(requests),
    repliesTo: (requests) => comments.repliesTo(requests),
  };
}
