// The rows the domain sees: plain objects, so Prisma types stay inside stores/.

export interface UserRecord {
  readonly id: bigint;
  readonly username: string;
  /** Private to the user. */
  readonly email: string;
  readonly createdAt: Date;
}

export interface UserCredentials extends UserRecord {
  readonly passwordHash: string;
}

export interface PostRecord {
  readonly id: bigint;
  readonly authorId: bigint;
  readonly title: string;
  readonly body: string;
  readonly createdAt: Date;
}

export interface CommentRecord {
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
