// The stores the domain needs, in its own terms. Redis, PostgreSQL and RabbitMQ
// implement these in src/stores/; the use cases and pipeline loops take them as
// arguments, so neither knows a client library or a key layout.
import type {
  AppliedChange,
  AppliedLikes,
  Comment,
  Counts,
  CounterName,
  DatabaseCount,
  DatabaseTarget,
  LikeableTarget,
  LikeChange,
  LikerPosition,
  MalformedOutboxEntry,
  OutboxEntry,
  Page,
  Post,
  RedisTarget,
  Repair,
  Target,
  TargetSnapshot,
  TargetView,
  User,
} from "./model.js";

export type NewUserOutcome = { readonly created: User } | { readonly taken: "username" | "email" };

export interface UserStore {
  create(input: { username: string; email: string; passwordHash: string }): Promise<NewUserOutcome>;
  /** The user with their password hash, for signing in. */
  findCredentials(username: string): Promise<{ readonly user: User; readonly passwordHash: string } | null>;
  findByIds(ids: readonly bigint[]): Promise<User[]>;
}

export interface PostStore {
  /** Inserts the post and counts it for its author, in one transaction. */
  create(input: { authorId: bigint; title: string; body: string }): Promise<Post>;
  findByIds(ids: readonly bigint[]): Promise<Post[]>;
  /** Newest first, strictly older than `beforeId` when given. */
  feed(limit: number, beforeId: bigint | null): Promise<Page<Post>>;
}

export interface CommentStore {
  /** Inserts the comment and counts it on its post (and parent), in one transaction. */
  create(input: { postId: bigint; authorId: bigint; parentId: bigint | null; body: string }): Promise<Comment>;
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

/** One target's page of likers: at most `limit`, newest like first, strictly after `after` when given. */
export interface LikersRequest {
  readonly target: LikeableTarget;
  readonly limit: number;
  readonly after: LikerPosition | null;
}

export interface LikeHistoryStore {
  /** The likers each request asks for, in order, with one query for them all. */
  likers(requests: readonly LikersRequest[]): Promise<LikerPosition[][]>;
  /**
   * Applies coalesced changes (at most one per target and user) in one transaction:
   * a change passes only when its version is newer than the last applied for its
   * (target, user); counters move by the rows really inserted or deleted.
   */
  apply(changes: readonly LikeChange[]): Promise<AppliedLikes>;
}

export interface SnapshotStore {
  /** A target's likers, counters and applied version, as of one moment, and a new epoch for it. */
  read(target: Target): Promise<TargetSnapshot>;
  /** The applied change of each user whose change committed after the snapshot `mark`, whatever its version. */
  changesSince(target: Target, mark: string): Promise<AppliedChange[]>;
  /** The newest version PostgreSQL applied to the target, or the start of its last epoch if later (0 when none). */
  newestVersion(target: Target): Promise<bigint>;
  /** Whether transaction `txid` had committed when the snapshot `mark` was taken. */
  sawCommit(mark: string, txid: bigint): boolean;
}

export interface DatabaseReconcileStore {
  /**
   * Like counter, rows and highest applied version of each target, in order, with
   * its members where it has at most `memberLimit` rows (null otherwise).
   */
  read(targets: readonly LikeableTarget[], memberLimit: number): Promise<DatabaseTarget[]>;
  /** The target's likers with ids above `afterUser`, lowest first, at most `limit`: one keyset page. */
  membersAfter(target: LikeableTarget, afterUser: bigint, limit: number): Promise<bigint[]>;
  /** Which of `users` like the target, in order. */
  likedBy(target: LikeableTarget, users: readonly bigint[]): Promise<boolean[]>;
  /** The next page of targets with likes or a like counter, in (type, id) order, after `after`. */
  page(after: LikeableTarget | null, limit: number): Promise<DatabaseCount[]>;
  /** Applies a repair to PostgreSQL; safe to repeat. */
  repair(repair: Exclude<Repair, { kind: "recountRedis" }>): Promise<void>;
  /** Targets with likes or a like counter, for progress estimates. */
  countTargets(): Promise<number>;
}

/** What to read of targets of one type. */
export interface ViewRequest {
  /** The counters to read: those of the targets' type. */
  readonly names: readonly CounterName[];
  /** Whose likes to look up (likeable targets only); null for none. */
  readonly viewerId: bigint | null;
}

export interface CounterStore {
  /** Each target's counts in the order given, or null where Redis does not hold the target. One round trip. */
  read(targets: readonly Target[]): Promise<(Counts | null)[]>;
  /**
   * What a feed shows of targets of one type: the counters named and the
   * viewer's like, in the order given, or null where Redis does not hold the
   * target. One round trip per Redis node in steady state; one more when a
   * target has grown since this process last read it.
   */
  view(targets: readonly Target[], request: ViewRequest): Promise<(TargetView | null)[]>;
  /**
   * Creates the target in Redis with these counts unless Redis holds it; true when created.
   * `authorId` is who likes of the target credit.
   */
  init(target: Target, counts: Counts, authorId?: bigint): Promise<boolean>;
  /** Adds `delta` to a counter of a target Redis holds; false when Redis does not hold it. */
  bump(target: Target, name: CounterName, delta: number): Promise<boolean>;
}

/** The result of a like or unlike in Redis. */
export type MembershipChange =
  | {
      readonly kind: "applied";
      readonly changed: boolean;
      /** The target's counts right after the change, from the same atomic step. */
      readonly counts: Counts;
    }
  /** Redis does not hold the target: it must be loaded from PostgreSQL first. */
  | { readonly kind: "unloaded" };

export interface LikeStore {
  /** Adds the user to the target's likers once; throws TargetFullError when no shard has room. */
  like(target: LikeableTarget, userId: bigint): Promise<MembershipChange>;
  unlike(target: LikeableTarget, userId: bigint): Promise<MembershipChange>;
  /** Whether `userId` likes each target, in order. */
  hasLiked(targets: readonly LikeableTarget[], userId: bigint): Promise<boolean[]>;
}

export interface RebuildMark {
  readonly epoch: bigint;
  /** The lowest version the epoch stamps. */
  readonly epochStart: bigint;
  readonly mark: string;
}

/** A change PostgreSQL applied after the target was loaded into Redis, to bring in late. */
export interface LateChange extends AppliedChange {
  readonly target: Target;
  /** The epoch of the rebuild that missed it: a target rebuilt again since saw it in its own snapshot. */
  readonly intoEpoch: bigint;
}

export interface RebuildStore {
  /** Takes the target's rebuild lock; the token to release it, or null when another process holds it. */
  lock(target: Target, ttlMs: number): Promise<string | null>;
  unlock(target: Target, token: string): Promise<void>;
  /** Writes the target from a PostgreSQL snapshot; false when Redis already held it. */
  write(target: Target, snapshot: TargetSnapshot, authorId: bigint | null): Promise<boolean>;
  /**
   * Brings a change PostgreSQL applied late into a rebuilt target. "tooLate": it
   * came after the rebuild window, when Redis no longer knows what superseded it.
   */
  replay(change: LateChange): Promise<"replayed" | "unchanged" | "tooLate">;
  /**
   * Of each target Redis holds since a rebuild: the lowest version its epoch stamps
   * (a change below it was made before the rebuild) and the rebuild's snapshot mark
   * (what PostgreSQL had committed). Null for a target not held or never rebuilt.
   */
  rebuilds(targets: readonly Target[]): Promise<(RebuildMark | null)[]>;
  /**
   * Takes a target out of Redis whole, to come back by a rebuild. Only small
   * targets whose changes PostgreSQL has all applied (`persistedVersion`) leave.
   */
  evict(target: LikeableTarget, persistedVersion: bigint): Promise<"evicted" | "absent" | "kept">;
  /** Takes a target out of Redis whole whatever it holds, to come back by a rebuild (changes in flight are replayed into it). */
  drop(target: LikeableTarget): Promise<"evicted" | "absent" | "kept">;
  /** The version a target dropped within the last hour had last stamped, or null. */
  droppedVersion(target: Target): Promise<bigint | null>;
}

/** A target a reconcile pass could not compare because Redis is ahead of PostgreSQL. */
export interface InFlightTarget {
  readonly target: LikeableTarget;
  readonly redisVersion: bigint;
  readonly databaseVersion: bigint;
}

/** One page of a walk over the targets Redis holds. */
export interface RedisTargetPage {
  readonly targets: LikeableTarget[];
  /** Where the walk goes on, or null when it is complete. */
  readonly cursor: string | null;
}

export interface RedisReconcileStore {
  /** The next page of likeable targets Redis holds. */
  scan(cursor: string | null, count: number): Promise<RedisTargetPage>;
  /**
   * Each target's count, member count and version, with its members where it has
   * at most `memberLimit` (null where Redis no longer holds the target).
   */
  survey(targets: readonly LikeableTarget[], memberLimit: number): Promise<(RedisTarget | null)[]>;
  /** survey() with every member loaded, for targets known to be small. */
  inspect(targets: readonly LikeableTarget[]): Promise<((RedisTarget & { readonly members: readonly bigint[] }) | null)[]>;
  /**
   * One bounded piece of a walk over every member of the target's shards of
   * `generations`: members from whole shards, starting at shard
   * `from`, until at least `atLeast` (or the shards run out); `next` is where the walk goes on, null at the end.
   */
  membersFrom(target: LikeableTarget, generations: readonly number[], from: number, atLeast: number): Promise<{ members: bigint[]; next: number | null }>;
  /** Which of `users` the target's shards of `generations` hold, in order. */
  holdsMembers(target: LikeableTarget, generations: readonly number[], users: readonly bigint[]): Promise<boolean[]>;
  /** The target's version now (-1 when Redis no longer holds it), to tell whether it changed during a walk. */
  version(target: LikeableTarget): Promise<bigint>;
  /**
   * Notes that each target was found in flight at these versions and answers, per target,
   * in how many passes in a row it was found so (1 when its versions moved since).
   * Kept in Redis, so it spans processes and passes.
   */
  noteInFlight(targets: readonly InFlightTarget[]): Promise<number[]>;
  /** Which targets Redis holds. */
  holds(targets: readonly LikeableTarget[]): Promise<boolean[]>;
  /** Sets the like counter to the member count if the target is unchanged since `observedVersion`. */
  recount(target: LikeableTarget, observedVersion: bigint): Promise<"recounted" | "changed" | "absent">;
  /** Keys Redis holds, for progress estimates. */
  size(): Promise<number>;
}

/** Where an outbox entry sits: enough to acknowledge it. */
export type OutboxEntryPlace = Pick<OutboxEntry, "partition" | "entryId">;

export interface OutboxRead {
  readonly entries: readonly (OutboxEntry | MalformedOutboxEntry)[];
  /**
   * Entries still pending in the group whose stream entry is gone (deleted or
   * trimmed, or a Redis restarted from an older file): nothing is left to publish.
   */
  readonly missing: readonly OutboxEntryPlace[];
  /** Redis had lost the outbox (a flush, a new server) and it was opened again. */
  readonly reopened: boolean;
  /** More entries are known to wait: read again at once rather than linger. */
  readonly more: boolean;
}

/** The like changes Redis appended, waiting to be published. */
export interface Outbox {
  /** This reader's name among the readers of the outbox. */
  readonly reader: string;
  /** Prepares the outbox for reading. */
  open(): Promise<void>;
  /**
   * New entries, at most about a batch over every partition together, shared fairly
   * between the partitions that have some; waits a little when there are none.
   */
  read(): Promise<OutboxRead>;
  /** Removes entries the broker now holds, or that are gone. */
  acknowledge(entries: readonly OutboxEntryPlace[]): Promise<void>;
  /** Says this reader is still working on `entries`, so that no other reader takes them over. */
  keep(entries: readonly OutboxEntryPlace[]): Promise<void>;
  /**
   * Takes over, at most about a batch at a time, entries nobody kept for longer than
   * `idleMs`: those of a reader that stopped, or of a read whose reply was lost.
   */
  claimAbandoned(idleMs: number): Promise<OutboxRead>;
  /** Entries waiting, over every partition. */
  length(): Promise<number>;
}

/** A lock several processes share, held for at most a while. */
export interface Lease {
  /** A token when taken, null when another holder has it. */
  acquire(ttlMs: number): Promise<string | null>;
  release(token: string): Promise<void>;
}

/** A message as a consumer receives it: read, or the reason it cannot be. */
export type Delivery<T> = { readonly kind: "valid"; readonly value: T } | { readonly kind: "invalid"; readonly reason: string };

/**
 * What becomes of a message once handled: done; parked for good (it can never be
 * applied); or applied again after a delay (it is valid, but the store refused it).
 */
export type Disposition = "ack" | { readonly deadLetter: string } | { readonly retryLater: string };

export interface Subscription {
  /** Stops taking messages and waits for those in hand. */
  close(): Promise<void>;
}

export interface ConsumeOptions {
  /** Messages of one queue handed to the handler at once, at most: the broker delivers no more until one is settled. */
  readonly concurrency: number;
  /** Called when a queue's consumer holds `concurrency` messages: nothing more arrives from it until one is settled. */
  readonly onFull?: () => void;
}

/** The persist queues of the deployment's previous routing, left holding changes no process consumes. */
export interface PreviousRouting {
  /** The number of persist queues they were routed by. */
  readonly queues: number;
  /** As MessageBus.consumeLikeChanges, on those queues. */
  consumeLikeChanges(options: ConsumeOptions, handle: (deliveries: readonly Delivery<LikeChange>[]) => Promise<Disposition[]>): Subscription;
  /** Whether every one of them is empty; throws when another process consumes them too. */
  drained(): Promise<boolean>;
}

export interface MessageBus {
  /**
   * Checks, before anything is consumed or published, that this process routes like
   * changes the way the deployment does (the same number of persist queues), and
   * takes over a new number only when no change can be on its way under the old one;
   * throws an error naming the fix otherwise. Answers the old routing's queues when
   * they must be drained first (then call again), null when done.
   */
  open(): Promise<PreviousRouting | null>;
  /** Publishes changes durably, in batches that keep each partition's order; resolves once the broker confirmed every one. */
  publishLikeChanges(entries: readonly OutboxEntry[]): Promise<void>;
  /** Publishes repairs durably; resolves once the broker confirmed every one. */
  publishRepairs(repairs: readonly Repair[]): Promise<void>;
  /** Parks what can never be applied in the dead-letter queue, with the reason. */
  deadLetter(body: unknown, reason: string, origin: string): Promise<void>;
  /**
   * Hands every persist queue's changes to `handle`, a message's changes at a time,
   * each read or refused on its own; `handle` answers a disposition per change, and
   * those dead-lettered go alone. A thrown error requeues the whole message.
   */
  consumeLikeChanges(options: ConsumeOptions, handle: (deliveries: readonly Delivery<LikeChange>[]) => Promise<Disposition[]>): Subscription;
  consumeRepairs(options: ConsumeOptions, handle: (delivery: Delivery<Repair>) => Promise<Disposition>): Subscription;
  close(): Promise<void>;
}

/** Rate budgets kept where every API process shares them (src/domain/rate-limits.ts spends them). */
export interface RateBudgetStore {
  /**
   * Charges `cost` units against `subject`'s budget named `budget`, which holds
   * `limit` units and refills them evenly over `periodMs`; `cost` is 1 to `limit`.
   * Answers 0 when charged, else the milliseconds until the same charge would be
   * accepted (nothing charged).
   */
  charge(budget: string, subject: string, cost: number, limit: number, periodMs: number): Promise<number>;
}
