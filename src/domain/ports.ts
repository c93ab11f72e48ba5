// The stores the domain needs, in its own terms. Redis, PostgreSQL and RabbitMQ
// implement these in src/stores/; the use cases and pipeline loops take them as
// arguments, so neither knows a client library or a key layout.
import type {
  AppliedChange,
  AppliedChanges,
  Change,
  Comment,
  CounterName,
  CounterSurvey,
  CounterValue,
  Counts,
  DatabaseCount,
  HotWindow,
  DatabaseTarget,
  IdRun,
  MemberPosition,
  ListedRelation,
  ListPosition,
  MalformedOutboxEntry,
  OutboxEntry,
  Page,
  PairRecord,
  Post,
  RankedLikes,
  RedisTarget,
  Relation,
  Repair,
  Target,
  TargetSnapshot,
  TargetType,
  TargetView,
  User,
} from "./model.js";

export type NewUserOutcome = { readonly created: User } | { readonly taken: "username" | "email" };

export interface UserStore {
  create(input: { username: string; email: string; passwordHash: string }): Promise<NewUserOutcome>;
  /** The user with their password hash, for signing in. */
  findCredentials(username: string): Promise<{ readonly user: User; readonly passwordHash: string } | null>;
  findByIds(ids: readonly bigint[]): Promise<User[]>;
  /**
   * The lowest `maxIds` user ids above `after`, as runs of consecutive ids in
   * ascending order: one statement reading at most `maxIds` index entries, however
   * many users there are. Fewer ids than `maxIds` means none is left above them.
   */
  idRunsAfter(after: bigint, maxIds: number): Promise<IdRun[]>;
}

/**
 * Registrations told to every API process, so each knows a new user without
 * asking PostgreSQL. Best effort: a process that misses one looks the user up once.
 */
export interface UserAnnouncements {
  /** Tells every listening process that this user's row is committed. */
  announce(userId: bigint): Promise<void>;
  /**
   * Calls `handler` with every user announced from now on, by any process;
   * resolves once subscribed, with the function that stops it.
   */
  onAnnounced(handler: (userId: bigint) => void): Promise<() => Promise<void>>;
}

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

/** One target's page of members of a relation: at most `limit`, newest first, strictly after `after` when given. */
export interface MembersRequest {
  readonly relation: Relation;
  readonly target: Target;
  readonly limit: number;
  readonly after: MemberPosition | null;
}

/**
 * One user's page of what they are a member of in a relation (the posts they liked
 * or collected, the users they follow): at most `limit`, newest first, strictly
 * after `after` when given, leaving out the targets in `skip`.
 */
export interface MembershipsRequest {
  readonly relation: Relation;
  /** The type of target listed (a user's likes of posts, not of comments). */
  readonly targetType: TargetType;
  readonly userId: bigint;
  readonly limit: number;
  readonly after: ListPosition | null;
  readonly skip: ReadonlySet<bigint>;
}

export interface RelationHistoryStore {
  /** The members each request asks for, in order, with one query for them all. */
  members(requests: readonly MembersRequest[]): Promise<MemberPosition[][]>;
  /** What each user is a member of, per request in order, with one query for them all. */
  memberships(requests: readonly MembershipsRequest[]): Promise<ListPosition[][]>;
  /**
   * Applies a batch of changes in one transaction. Relation changes (at most one
   * per target, relation and user) pass only when their version is newer than
   * the last applied for their pair; counters move by the rows really inserted or
   * deleted. View changes add what their totals add to the epoch's highest.
   */
  apply(changes: readonly Change[]): Promise<AppliedChanges>;
}

/** What committed to a target after a snapshot of it. */
export interface CommittedSince {
  /** The applied change of each (relation, user) whose change committed after the snapshot, whatever its version. */
  readonly changes: readonly AppliedChange[];
  /** The views of each epoch whose total rose after the snapshot. */
  readonly views: readonly { readonly epoch: bigint; readonly total: number }[];
}

export interface SnapshotStore {
  /** A target's members, counters, lists and applied version, as of one moment, and a new epoch for it. */
  read(target: Target): Promise<TargetSnapshot>;
  /** What committed to the target after the snapshot `mark`, whatever its version. */
  changesSince(target: Target, mark: string): Promise<CommittedSince>;
  /** The target's derived counters as they stand now, with their sequence numbers. */
  derived(target: Target): Promise<CounterValue[]>;
  /** The newest version PostgreSQL applied to the target, or the start of its last epoch if later (0 when none). */
  newestVersion(target: Target): Promise<bigint>;
  /** Whether transaction `txid` had committed when the snapshot `mark` was taken. */
  sawCommit(mark: string, txid: bigint): boolean;
}

/**
 * Targets' counters as PostgreSQL's `counters` table holds them: what the pipeline
 * committed, in the transaction that wrote the changes' rows. One statement for all.
 */
export interface PersistedCounts {
  /** Each target's counts in order; a counter with no row is absent (read as 0). */
  read(targets: readonly Target[]): Promise<Counts[]>;
}

/** Redis's memory as last measured: of its fullest node on a cluster. */
export interface MemoryReading {
  readonly usedBytes: number;
  /** Its `maxmemory`; 0 when it has no limit. */
  readonly maxBytes: number;
  /** Its `maxmemory-policy`. */
  readonly policy: string;
}

export interface MemoryStore {
  /** Measures Redis's memory now (INFO memory: one command per node). */
  read(): Promise<MemoryReading>;
  /**
   * Posts and comments Redis holds, least recently used first: the `count` coldest
   * of about `sample` counter hashes found by SCAN from where the previous call stopped.
   */
  coldest(sample: number, count: number): Promise<Target[]>;
}

/** A relation of a target, as a reconcile pass compares it. */
export interface RelationTarget {
  readonly relation: Relation;
  readonly target: Target;
}

export interface DatabaseReconcileStore {
  /**
   * The relation's counter, rows and the target's highest applied version, for each
   * item in order, with its members where it has at most `memberLimit` rows (null otherwise).
   */
  read(items: readonly RelationTarget[], memberLimit: number): Promise<DatabaseTarget[]>;
  /** The members with ids above `afterUser`, lowest first, at most `limit`: one keyset page. */
  membersAfter(item: RelationTarget, afterUser: bigint, limit: number): Promise<bigint[]>;
  /** Which of `users` are members, in order. */
  membersAmong(item: RelationTarget, users: readonly bigint[]): Promise<boolean[]>;
  /** Per list, PostgreSQL's newest `limit` rows of the user's relation to posts, newest first. */
  newestListed(lists: readonly ListRef[], limit: number): Promise<ListPosition[][]>;
  /** PostgreSQL's record of the newest change applied to each of `users`' memberships of the item, for those it has one of. */
  pairRecords(item: RelationTarget, users: readonly bigint[]): Promise<Map<bigint, PairRecord>>;
  /** The next page of relations of targets with members or a counter, in (type, id, relation) order, after `after`. */
  page(after: RelationTarget | null, limit: number): Promise<DatabaseCount[]>;
  /** Relations of targets with members or a counter, for progress estimates. */
  countTargets(): Promise<number>;
  /**
   * The next page of targets of every type, in (type, id) order after `after`, with
   * what their derived counters should be and are, and their views and version.
   */
  counterPage(after: Target | null, limit: number): Promise<Omit<CounterSurvey, "redis" | "redisVersion">[]>;
  /** Targets whose counters counterPage walks, for progress estimates. */
  countCounterTargets(): Promise<number>;
  /**
   * Applies a repair to PostgreSQL; safe to repeat. Answers the derived counters it
   * set, for Redis to mirror.
   */
  repair(repair: Exclude<Repair, { kind: "recountRedis" | "mirrorDerived" }>): Promise<CounterValue[]>;
  /** PostgreSQL's derived counters of a target as they stand, with their sequence numbers. */
  derived(target: Target, names: readonly CounterName[]): Promise<CounterValue[]>;
}

/** What to read of targets of one type. */
export interface ViewRequest {
  /** The counters to read: those of the targets' type. */
  readonly names: readonly CounterName[];
  /** The relations of the targets' type whose membership of the viewer to look up. */
  readonly relations: readonly Relation[];
  /** Whose memberships to look up; null for none. */
  readonly viewerId: bigint | null;
  /** Read Redis even for counts held in process memory: live counts, which heard of a change and must show it. */
  readonly exact?: boolean;
}

export interface CounterStore {
  /** Each target's counts in the order given, or null where Redis does not hold the target. One round trip. */
  read(targets: readonly Target[]): Promise<(Counts | null)[]>;
  /**
   * What a feed shows of targets of one type: the counters named and the
   * viewer's memberships, in the order given, or null where Redis does not hold
   * the target. One round trip per Redis node in steady state; one more when a
   * target has grown since this process last read it.
   */
  view(targets: readonly Target[], request: ViewRequest): Promise<(TargetView | null)[]>;
  /**
   * Creates the target in Redis with these counts unless Redis holds it; true when created.
   * `authorId` is who likes and collects of the target credit.
   */
  init(target: Target, counts: Counts, authorId?: bigint): Promise<boolean>;
  /**
   * Sets derived counters to the values PostgreSQL committed, each only where Redis
   * holds no later one (a higher sequence number); targets Redis does not hold are
   * left alone (their rebuild reads PostgreSQL). Safe to repeat, in any order.
   */
  mirror(values: readonly CounterValue[]): Promise<void>;
}

/** The result of a membership change in Redis. */
export type MembershipChange =
  | {
      readonly kind: "applied";
      readonly changed: boolean;
      /** The target's counts right after the change, from the same atomic step. */
      readonly counts: Counts;
    }
  /** Redis does not hold the target: it must be loaded from PostgreSQL first. */
  | { readonly kind: "unloaded" };

export interface MembershipStore {
  /**
   * Adds the user to the target's members of the relation once; throws TargetFullError when no shard has room.
   * `answerAtMs`: when the caller answers whatever happens (its request's deadline,
   * milliseconds since the epoch). The change applies before then or never, and a
   * failure is thrown no earlier. Without it, the Redis client's command timeout sets it.
   */
  add(relation: Relation, target: Target, userId: bigint, answerAtMs?: number): Promise<MembershipChange>;
  remove(relation: Relation, target: Target, userId: bigint, answerAtMs?: number): Promise<MembershipChange>;
  /** Whether `userId` is a member of each target's relation, in order. */
  holds(relation: Relation, targets: readonly Target[], userId: bigint): Promise<boolean[]>;
}

/** Views counted in Redis, or the need to load the post first. */
export type CountedViews = { readonly kind: "counted"; readonly views: number } | { readonly kind: "unloaded" };

export interface ViewStore {
  /**
   * Adds `count` views to the post's counter and appends them to the outbox, in one
   * step, unless the post already took flush `flush.seq` or a later one from
   * `flush.sender`: a retry of the same flush (after a timeout that may have reached
   * Redis) counts once, and a stale one arriving after a newer flush counts nothing.
   * The post remembers a sender's last flush for ten minutes after it.
   */
  add(target: Target, count: number, flush: ViewFlush): Promise<CountedViews>;
}

/** Who sent a flush of views (one id per process) and its number, growing with each flush of that sender. */
export interface ViewFlush {
  readonly sender: string;
  readonly seq: number;
}

/** One change of a user's list: the target joined or left at `at`, with the change's version. */
export interface ListChange {
  readonly targetId: bigint;
  readonly member: boolean;
  readonly version: bigint;
  readonly at: Date;
}

/** The newest change of a target in a user's list that Redis keeps a record of. */
export interface RecentChange {
  readonly member: boolean;
  readonly at: Date;
}

/** A user's list as Redis holds it. */
export interface HeldList {
  /** Its newest entries, newest first, all newer than `horizon`. */
  readonly entries: readonly ListPosition[];
  /**
   * Where Redis's knowledge ends: entries at or before it are read from
   * PostgreSQL. Null when Redis holds every entry there is.
   */
  readonly horizon: ListPosition | null;
  /**
   * Targets whose membership changed recently (two minutes, or longer while
   * PostgreSQL has not committed the change), with the newest change: PostgreSQL
   * may not hold it yet, so its rows for them are not to be believed.
   */
  readonly recent: ReadonlyMap<bigint, RecentChange>;
}

/** Changes to one user's list. */
export interface ListChanges {
  readonly relation: ListedRelation;
  readonly userId: bigint;
  readonly changes: readonly ListChange[];
}

/**
 * Per user, relation and target type, a superset of the targets the user joined,
 * which lets a feed rule out the targets a viewer did not join without asking each
 * (src/stores/redis/member-index-store.ts).
 */
export interface MemberIndexStore {
  /** Targets an index holds at most. */
  readonly capacity: number;
  /**
   * Makes the index exist before PostgreSQL is read for it, so targets rebuilt
   * meanwhile note their members in it.
   */
  begin(relation: Relation, targetType: TargetType, userId: bigint): Promise<void>;
  /**
   * Adds the targets PostgreSQL holds the user a member of to the index and marks it
   * complete, or marks it overflowed when PostgreSQL holds more than the capacity.
   */
  complete(relation: Relation, targetType: TargetType, userId: bigint, targetIds: readonly bigint[], overflowed: boolean): Promise<void>;
}

export interface ListStore {
  /**
   * Applies changes to a user's list, each only when newer than what the list
   * knows of its target. False when Redis does not hold the list (only its record
   * of recent changes moved; a load reads PostgreSQL and that record). `committed`:
   * PostgreSQL holds these changes (the pipeline's write), so their records may expire.
   */
  apply(relation: ListedRelation, userId: bigint, changes: readonly ListChange[], committed: boolean): Promise<boolean>;
  /** Applies a persist batch's committed changes to every list they touch, as `apply` does, in one call per node. */
  applyCommitted(lists: readonly ListChanges[]): Promise<void>;
  /** The user's list, or null when Redis does not hold it (or is loading it). */
  read(relation: ListedRelation, userId: bigint): Promise<HeldList | null>;
  /** The records of recent changes of the list, whether or not Redis holds it. */
  recent(relation: ListedRelation, userId: bigint): Promise<ReadonlyMap<bigint, RecentChange>>;
  /** Takes the list's load lock; the token to release it, or null when another process loads it. */
  lock(relation: ListedRelation, userId: bigint, ttlMs: number): Promise<string | null>;
  unlock(relation: ListedRelation, userId: bigint, token: string): Promise<void>;
  /** Empties the list and marks it loading: changes arriving from now on are kept. Then read PostgreSQL, then `finish`. */
  begin(relation: ListedRelation, userId: bigint): Promise<void>;
  /** Joins PostgreSQL's newest entries (and where its knowledge ends) to the changes that arrived since `begin`. */
  finish(relation: ListedRelation, userId: bigint, entries: readonly ListPosition[], horizon: ListPosition | null): Promise<void>;
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

/** Views of an earlier epoch PostgreSQL applied after the post was loaded into Redis. */
export interface LateViews {
  readonly target: Target;
  readonly epoch: bigint;
  /** The epoch's total PostgreSQL now holds. */
  readonly total: number;
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
  /** Brings late views into a rebuilt post: what the total adds to what the post already has of its epoch. */
  replayViews(views: LateViews): Promise<"replayed" | "unchanged" | "tooLate">;
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
  evict(target: Target, persistedVersion: bigint): Promise<"evicted" | "absent" | "kept">;
  /** Takes a target out of Redis whole whatever it holds, to come back by a rebuild (changes in flight are replayed into it). */
  drop(target: Target): Promise<"evicted" | "absent" | "kept">;
  /** The version a target dropped within the last hour had last stamped, or null. */
  droppedVersion(target: Target): Promise<bigint | null>;
}

/** A target a reconcile pass could not compare because Redis is ahead of PostgreSQL. */
export interface InFlightTarget {
  readonly target: Target;
  readonly redisVersion: bigint;
  readonly databaseVersion: bigint;
}

/** One page of a walk over the targets Redis holds. */
export interface RedisTargetPage {
  readonly targets: Target[];
  /** Where the walk goes on, or null when it is complete. */
  readonly cursor: string | null;
}

export interface RedisReconcileStore {
  /** The next page of targets Redis holds. */
  scan(cursor: string | null, count: number): Promise<RedisTargetPage>;
  /**
   * Each item's count, member count and version, with its members where it has at
   * most `memberLimit` (null where Redis no longer holds the target).
   */
  survey(items: readonly RelationTarget[], memberLimit: number): Promise<(RedisTarget | null)[]>;
  /** survey() with every member loaded, for targets known to be small. */
  inspect(items: readonly RelationTarget[]): Promise<((RedisTarget & { readonly members: readonly bigint[] }) | null)[]>;
  /**
   * One bounded piece of a walk over every member of the item's shards of
   * `generations`: members from whole shards, starting at shard
   * `from`, until at least `atLeast` (or the shards run out); `next` is where the walk goes on, null at the end.
   */
  membersFrom(item: RelationTarget, generations: readonly number[], from: number, atLeast: number): Promise<{ members: bigint[]; next: number | null }>;
  /** Which of `users` the item's shards of `generations` hold, in order. */
  holdsMembers(item: RelationTarget, generations: readonly number[], users: readonly bigint[]): Promise<boolean[]>;
  /** The target's version now (-1 when Redis no longer holds it), to tell whether it changed during a walk. */
  version(target: Target): Promise<bigint>;
  /**
   * Notes that each target was found in flight at these versions and answers, per target,
   * in how many passes in a row it was found so (1 when its versions moved since).
   * Kept in Redis, so it spans processes and passes.
   */
  noteInFlight(targets: readonly InFlightTarget[]): Promise<number[]>;
  /** Which targets Redis holds. */
  holds(targets: readonly Target[]): Promise<boolean[]>;
  /** Sets the relation's counter to the member count if the target is unchanged since `observedVersion`. */
  recount(item: RelationTarget, observedVersion: bigint): Promise<"recounted" | "changed" | "absent">;
  /**
   * The counters of each target other than membership counts, with the sequence
   * numbers of the derived ones, and the target's version (null where Redis does not hold it).
   */
  counters(targets: readonly Target[]): Promise<({ readonly values: CounterSurvey["redis"] & object; readonly version: bigint } | null)[]>;
  /** Keys Redis holds, for progress estimates. */
  size(): Promise<number>;
  /** The next page of users' lists Redis holds. */
  scanLists(cursor: string | null, count: number): Promise<{ readonly lists: readonly ListRef[]; readonly cursor: string | null }>;
  /**
   * Each list's entries and horizon as Redis holds them, without keeping the list
   * longer; null where it is not held, being loaded, or was loaded again while read.
   */
  readLists(lists: readonly ListRef[]): Promise<(Omit<HeldList, "recent"> | null)[]>;
  /** Which of `targetIds` the list keeps a record of a recent change of (those speak for their posts). */
  listRecords(list: ListRef, targetIds: readonly bigint[]): Promise<boolean[]>;
  /** Drops the list's entries and horizon (its records stay), so its next read loads it from PostgreSQL. */
  dropList(list: ListRef): Promise<void>;
}

/** One user's list of one relation. */
export interface ListRef {
  readonly relation: ListedRelation;
  readonly userId: bigint;
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

/** The changes Redis appended, waiting to be published. */
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

/** Work due at known times that several processes share: the first to claim a time does that work. */
export interface TickClaims {
  /** True for the one caller that claimed `tick` first. */
  claim(tick: Date): Promise<boolean>;
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
  /** As MessageBus.consumeChanges, on those queues. */
  consumeChanges(options: ConsumeOptions, handle: (deliveries: readonly Delivery<Change>[]) => Promise<Disposition[]>): Subscription;
  /** Whether every one of them is empty; throws when another process consumes them too. */
  drained(): Promise<boolean>;
}

export interface MessageBus {
  /**
   * Checks, before anything is consumed or published, that this process routes
   * changes the way the deployment does (the same number of persist queues), and
   * takes over a new number only when no change can be on its way under the old one;
   * throws an error naming the fix otherwise. Answers the old routing's queues when
   * they must be drained first (then call again), null when done.
   */
  open(): Promise<PreviousRouting | null>;
  /** Publishes changes durably, in batches that keep each partition's order; resolves once the broker confirmed every one. */
  publishChanges(entries: readonly OutboxEntry[]): Promise<void>;
  /** Publishes repairs durably; resolves once the broker confirmed every one. */
  publishRepairs(repairs: readonly Repair[]): Promise<void>;
  /** Parks what can never be applied in the dead-letter queue, with the reason. */
  deadLetter(body: unknown, reason: string, origin: string): Promise<void>;
  /**
   * Hands every persist queue's changes to `handle`, a message's changes at a time,
   * each read or refused on its own; `handle` answers a disposition per change, and
   * those dead-lettered go alone. A thrown error requeues the whole message.
   */
  consumeChanges(options: ConsumeOptions, handle: (deliveries: readonly Delivery<Change>[]) => Promise<Disposition[]>): Subscription;
  consumeRepairs(options: ConsumeOptions, handle: (delivery: Delivery<Repair>) => Promise<Disposition>): Subscription;
  close(): Promise<void>;
}

/** Units a process let through on a budget decided in its memory, not yet told to the other processes. */
export interface BudgetSpending {
  readonly budget: string;
  readonly subject: string;
  /** At least 1. */
  readonly units: number;
  /** Units the budget holds, refilled evenly over `periodMs`. */
  readonly limit: number;
  readonly periodMs: number;
}

/** Rate budgets kept where every API process shares them (src/domain/rate-limits.ts spends them). */
export interface RateBudgetStore {
  /**
   * Charges `cost` units against `subject`'s budget named `budget`, which holds
   * `limit` units and refills them evenly over `periodMs`; `cost` is 1 to `limit`.
   * Answers a `waitMs` of 0 when charged, else the milliseconds until the same
   * charge would be accepted (nothing charged); and in both cases `aheadMs`, how
   * long until the budget is full again.
   */
  charge(budget: string, subject: string, cost: number, limit: number, periodMs: number): Promise<{ readonly waitMs: number; readonly aheadMs: number }>;
  /**
   * Adds spendings to the shared budgets whatever they hold (the units were let
   * through already), in one round trip per node. Answers, per spending, how far
   * its budget is spent now: the milliseconds until it is full again, 0 to
   * `periodMs`. Rejects when any did not answer.
   */
  report(spendings: readonly BudgetSpending[]): Promise<number[]>;
}

/** Announcements that targets' counts changed, heard from whichever process changed them. */
export interface CountChanges {
  /** Starts hearing of changes to these targets; resolves once it does. */
  listen(targets: readonly Target[]): Promise<void>;
  /** Stops hearing of them. */
  ignore(targets: readonly Target[]): Promise<void>;
  /**
   * Called with each target heard of, and with null when changes may have been
   * missed (the connection dropped and came back): every target is then to be read again.
   */
  onChange(handler: (target: Target | null) => void): void;
}

/** The hot ranking as Redis keeps it: time buckets and windows of posts by likes (src/domain/rankings.ts). */
export interface RankingStore {
  /** The window's best post ids, best first (ties: newest post first), at most `limit`: one command. */
  top(window: HotWindow, limit: number): Promise<bigint[]>;
  /**
   * Sets bucket counts (those still in their window at `nowMs`) and like counts as
   * PostgreSQL committed them, each only where Redis holds an older write of its
   * row. Safe to repeat, in any order; keeps each ranking within its capacity.
   */
  mirror(ranked: RankedLikes, nowMs: number): Promise<void>;
  /** Sums each window's buckets at `nowMs`; "missing" when Redis lost the ranking (rebuild it first). */
  refresh(nowMs: number): Promise<"refreshed" | "missing">;
  /** Marks the ranking rebuilt from PostgreSQL, so refreshes run. */
  markRebuilt(): Promise<void>;
}

/** The hot ranking's truth in PostgreSQL. */
export interface RankingSource {
  /**
   * The `limit` best posts of each bucket still in its window at `nowMs`, and of like
   * counts, with their seqs; and as many of those last written down to 0 (or below).
   */
  best(nowMs: number, limit: number): Promise<RankedLikes>;
  /** Deletes at most `limit` bucket rows that started before `before`; answers how many it deleted. */
  prune(before: Date, limit: number): Promise<number>;
}
