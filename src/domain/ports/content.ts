// Posts and comments as PostgreSQL keeps them, and pages of a parent's children.
import type { Comment, CounterValue, Page, Post } from "../model/index.js";

/** A new row, and the derived counters its insert moved, as committed with it. */
export interface Created<T> {
  readonly row: T;
  readonly counters: readonly CounterValue[];
}

export interface PostStore {
  /** Inserts the post and counts it for its author, in one transaction. */
  create(input: { authorId: bigint; title: string; body: string }): Promise<Created<Post>>;
  findByIds(ids: readonly bigint[]): Promise<Post[]>;
  /** Newest first, strictly older than `beforeId` when given. */
  feed(limit: number, beforeId: bigint | null): Promise<Page<Post>>;
}

export interface CommentStore {
  /** Inserts the comment and counts it on its post (and parent), in one transaction. */
  create(input: { postId: bigint; authorId: bigint; parentId: bigint | null; body: string }): Promise<Created<Comment>>;
  findByIds(ids: readonly bigint[]): Promise<Comment[]>;
  /** Top-level comments of each post, a page per request in order, with one query for them all. */
  ofPosts(requests: readonly PageRequest[]): Promise<Page<Comment>[]>;
  /** Replies to each comment, a page per request in order, with one query for them all. */
  repliesTo(requests: readonly PageRequest[]): Promise<Page<Comment>[]>;
}

/** One parent's page of children: newest first, at most `limit`, strictly older than `beforeId` when given. */
export interface PageRequest {
  readonly parentId: bigint;
  readonly limit: number;
  readonly beforeId: bigint | null;
}
