// The rows the API shows beside counts: users, posts and comments, and the positions
// of keyset-paged lists.

/** The largest id a bigint column holds: every id of the model fits it. */
export const maxId = 2n ** 63n - 1n;

/**
 * A database id as text, as clients, tokens, keys, cursors and messages carry it: a
 * positive decimal of 1 to 19 digits, no sign and no leading zero (whether it is at
 * most maxId is for the parser to say). One pattern, composed into the others.
 */
export const decimalIdSource = "[1-9][0-9]{0,18}";
const decimalId = new RegExp(`^${decimalIdSource}$`);
export const isDecimalId = (text: string): boolean => decimalId.test(text);

export interface User {
  readonly id: bigint;
  readonly username: string;
  /** Private to the user. */
  readonly email: string;
  readonly createdAt: Date;
}

/** Consecutive ids first..last (both included), every one of which exists. */
export interface IdRun {
  readonly first: bigint;
  readonly last: bigint;
}

export interface Post {
  readonly id: bigint;
  readonly authorId: bigint;
  readonly title: string;
  readonly body: string;
  readonly createdAt: Date;
}

export interface Comment {
  readonly id: bigint;
  readonly postId: bigint;
  readonly authorId: bigint;
  readonly parentId: bigint | null;
  readonly body: string;
  readonly createdAt: Date;
}

/** One page of a keyset-paged list, newest first: `hasMore` when rows follow the last one. */
export interface Page<T> {
  readonly items: readonly T[];
  readonly hasMore: boolean;
}

/** A position in a target's members, newest first: when the user joined, and the user. */
export interface MemberPosition {
  readonly at: Date;
  readonly userId: bigint;
}

/** A position in a user's list of liked or collected posts, newest first: when, and the post. */
export interface ListPosition {
  readonly at: Date;
  readonly targetId: bigint;
}
