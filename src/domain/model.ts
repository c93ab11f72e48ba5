// The service's model: what can be counted, the entities the API shows, and the
// changes and repairs that travel between Redis and PostgreSQL. Plain data only;
// every layer speaks these types, and no store's bookkeeping appears here.

/** What can be liked or counted. */
export type TargetType = "post" | "comment" | "user";

/** The kinds of target a user can like. */
export type LikeableType = Exclude<TargetType, "user">;

export interface Target {
  readonly type: TargetType;
  readonly id: bigint;
}

export interface LikeableTarget extends Target {
  readonly type: LikeableType;
}

/** "post:123": the key of a target in maps. */
export type TargetKey = `${TargetType}:${string}`;

export function targetKey(target: Target): TargetKey {
  return `${target.type}:${target.id}`;
}

export function isLikeable(target: Target): target is LikeableTarget {
  return target.type === "post" || target.type === "comment";
}

/** The counter names each kind of target carries, the first being the one a new target starts with. */
export const counterNames = {
  post: ["like", "read", "comment", "collect"],
  comment: ["like", "reply"],
  user: ["followers", "following", "posts", "likesReceived", "collectsReceived"],
} as const satisfies Record<TargetType, readonly string[]>;

export type CounterName<T extends TargetType = TargetType> = (typeof counterNames)[T][number];

/** Counter values of one target; a counter never touched is absent and reads 0. */
export type Counts = Readonly<Partial<Record<CounterName, number>>>;

export function countOf(counts: Counts, name: CounterName): number {
  return counts[name] ?? 0;
}

export function isCounterName(type: TargetType, name: string): name is CounterName {
  return (counterNames[type] as readonly string[]).includes(name);
}

/** Every counter of the target's type at zero. */
export function zeroCounts(type: TargetType): Counts {
  return Object.fromEntries(counterNames[type].map((name) => [name, 0]));
}

/** What a feed shows of a target beside its row: its counts, and whether the viewer likes it. */
export interface TargetView {
  readonly counts: Counts;
  /** False without a viewer, and for targets that cannot be liked. */
  readonly viewerLikes: boolean;
}

/** A change to one counter, as PostgreSQL and Redis both apply it. */
export interface CounterDelta {
  readonly target: Target;
  readonly name: CounterName;
  readonly delta: number;
}

export interface User {
  readonly id: bigint;
  readonly username: string;
  /** Private to the user. */
  readonly email: string;
  readonly createdAt: Date;
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

/** A position in a target's likers, newest first: the like's time and its user. */
export interface LikerPosition {
  readonly at: Date;
  readonly userId: bigint;
}

/** A like or unlike on its way from Redis, where it happened, to PostgreSQL. */
export interface LikeChange {
  readonly target: LikeableTarget;
  readonly userId: bigint;
  /** Author of the target, credited with likesReceived; null when unknown. */
  readonly authorId: bigint | null;
  /** The state after the change. */
  readonly liked: boolean;
  /**
   * Grows with every change of the target, and across its rebuilds: a change made
   * after a rebuild outranks every change made before it. A store applies a change
   * only when it is newer than the last it applied for the same (target, user).
   */
  readonly version: bigint;
  readonly at: Date;
}

/** A change waiting in the outbox of a partition; `entryId` is the outbox's own id for it. */
export interface OutboxEntry {
  readonly partition: number;
  readonly entryId: string;
  readonly change: LikeChange;
}

/** An outbox entry that cannot be read as a change: it goes to the dead-letter queue. */
export interface MalformedOutboxEntry {
  readonly partition: number;
  readonly entryId: string;
  readonly problem: string;
}

/** A target as PostgreSQL holds it, to put it back into Redis. */
export interface TargetSnapshot {
  readonly members: readonly bigint[];
  /** Counters other than the like count, which is the number of members. */
  readonly counts: Counts;
  /** Highest version of a like change PostgreSQL applied to the target (0 when none). */
  readonly version: bigint;
  /** The epoch the rebuilt target stamps its changes in: newer than every earlier one. */
  readonly epoch: bigint;
  /** Where the snapshot stands in PostgreSQL's commit order, for `SnapshotStore.changesSince`. */
  readonly mark: string;
}

/** The last change PostgreSQL applied for one user of a target. */
export interface AppliedChange {
  readonly userId: bigint;
  readonly liked: boolean;
  readonly version: bigint;
}

/** A change PostgreSQL holds as its pair's newest, and the transaction that committed it. */
export interface CommittedChange {
  readonly change: LikeChange;
  readonly txid: bigint;
}

/** What PostgreSQL did with a batch of like changes. */
export interface AppliedLikes {
  /** Rows added to `likes`. */
  readonly inserted: number;
  /** Rows removed from `likes`. */
  readonly deleted: number;
  /** Changes older than what PostgreSQL already holds for their (target, user): skipped. */
  readonly superseded: number;
  /** The changes that passed: newer than what PostgreSQL held for their (target, user). */
  readonly passed: readonly LikeChange[];
  /**
   * The changes that are now their pair's newest in PostgreSQL, the passed ones and
   * those an earlier delivery applied, each with the transaction that committed it:
   * what a rebuilt target may still need replayed.
   */
  readonly current: readonly CommittedChange[];
  /** The counter deltas committed, from the rows really inserted or deleted. */
  readonly deltas: readonly CounterDelta[];
}

/** A likeable target as Redis holds it, for a reconcile pass. */
export interface RedisTarget {
  readonly target: LikeableTarget;
  readonly count: number;
  /** Its members, or null when there are more than a reconcile pass loads at once (compared in chunks). */
  readonly members: readonly bigint[] | null;
  /** How many members its shards hold. */
  readonly memberCount: number;
  /** The membership generations whose shards held members: the only ones a walk over its members reads. */
  readonly generations: readonly number[];
  /** Version of the newest change Redis made to the target; -1 when it changed while being read. */
  readonly version: bigint;
  /** Seconds since anything read or wrote the target, before this inspection. */
  readonly idleSeconds: number;
}

/** A likeable target as PostgreSQL holds it, for a reconcile pass. */
export interface DatabaseTarget {
  readonly count: number;
  /** Its likers, or null when there are more than a reconcile pass loads at once (compared in chunks). */
  readonly members: readonly bigint[] | null;
  /** Rows in `likes`. */
  readonly rows: number;
  /** Highest version PostgreSQL applied to the target. */
  readonly version: bigint;
}

/** A target only PostgreSQL may hold, as one page of a reconcile pass lists it. */
export interface DatabaseCount {
  readonly target: LikeableTarget;
  /** The like counter's value (0 when there is no counter row). */
  readonly count: number;
  /** Rows in `likes`. */
  readonly rows: number;
}

export type DifferenceKind = "missingInDatabase" | "strayInDatabase" | "databaseCounter" | "redisCounter";

/** What a reconcile pass asks to be fixed; every repair is safe to repeat. */
export type Repair =
  | {
      /** Make PostgreSQL's likes of the target what Redis holds, then its counter their number. */
      readonly kind: "alignDatabase";
      readonly target: LikeableTarget;
      /** Redis's version when compared: a pair changed since is left alone. */
      readonly observedVersion: bigint;
      readonly add: readonly bigint[];
      readonly remove: readonly bigint[];
    }
  | {
      /** Set PostgreSQL's like counter of the target to its number of rows. */
      readonly kind: "recountDatabase";
      readonly target: LikeableTarget;
    }
  | {
      /** Set Redis's like counter of the target to its number of members, if unchanged since. */
      readonly kind: "recountRedis";
      readonly target: LikeableTarget;
      readonly observedVersion: bigint;
    };

export type RepairKind = Repair["kind"];
