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

/**
 * What a user can be a member of: the likers of a post or comment, the collectors
 * of a post, the followers of a user. Each relation counts its members on the
 * target (`counter`) and credits someone else once a change is persisted
 * (`credit`): the target's author, or the member themself (a follower's
 * `following`). Credits live in another Redis slot than the target, so they move
 * after PostgreSQL committed the change, from the value it committed.
 */
export type Relation = "like" | "collect" | "follow";

export const relations = {
  like: { targets: ["post", "comment"], counter: "like", credit: { to: "author", name: "likesReceived" } },
  collect: { targets: ["post"], counter: "collect", credit: { to: "author", name: "collectsReceived" } },
  follow: { targets: ["user"], counter: "followers", credit: { to: "member", name: "following" } },
} as const satisfies Record<Relation, { targets: readonly TargetType[]; counter: string; credit: { to: "author" | "member"; name: string } }>;

export const relationNames = Object.keys(relations) as Relation[];

/** The relations a target of this type has members of, in a fixed order. */
export function relationsOf(type: TargetType): readonly Relation[] {
  return relationsByType[type];
}

const relationsByType: Record<TargetType, readonly Relation[]> = {
  post: relationNames.filter((r) => (relations[r].targets as readonly TargetType[]).includes("post")),
  comment: relationNames.filter((r) => (relations[r].targets as readonly TargetType[]).includes("comment")),
  user: relationNames.filter((r) => (relations[r].targets as readonly TargetType[]).includes("user")),
};

export function isRelationTarget(relation: Relation, target: Target): boolean {
  return (relations[relation].targets as readonly TargetType[]).includes(target.type);
}

/** The relations whose newest members each user sees in a list of their own (`likedPosts`, `collectedPosts`). */
export type ListedRelation = "like" | "collect";
export const listedRelations: readonly ListedRelation[] = ["like", "collect"];
/** Entries of a user's list that Redis keeps; older ones are read from PostgreSQL. */
export const listCapacity = 100;

/**
 * Counters PostgreSQL derives from its own rows and Redis mirrors (a post's
 * comments, a comment's replies, a user's posts and credits): Redis takes them
 * as absolute values with PostgreSQL's sequence number, never as deltas, so a
 * repeated or late write cannot move them twice or backwards. The others move
 * in Redis first (membership counts, views) and reach PostgreSQL by the pipeline.
 */
export const derivedCounters = {
  post: ["comment"],
  comment: ["reply"],
  user: ["posts", "likesReceived", "collectsReceived", "following"],
} as const satisfies Record<TargetType, readonly string[]>;

export function isDerivedCounter(type: TargetType, name: string): boolean {
  return (derivedCounters[type] as readonly string[]).includes(name);
}

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

/** What a feed shows of a target beside its row: its counts, and the viewer's memberships. */
export interface TargetView {
  readonly counts: Counts;
  /**
   * Whether the viewer is a member, for each relation of the target's type that was
   * read (all of them unless the view came from a change of one relation); false
   * without a viewer.
   */
  readonly viewerIn: Readonly<Partial<Record<Relation, boolean>>>;
}

/** A counter's value as PostgreSQL committed it, and the sequence number of that write. */
export interface CounterValue {
  readonly target: Target;
  readonly name: CounterName;
  readonly value: number;
  readonly seq: bigint;
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

/** A user joining or leaving a target's members, on its way from Redis, where it happened, to PostgreSQL. */
export interface RelationChange {
  readonly kind: "relation";
  readonly relation: Relation;
  readonly target: Target;
  readonly userId: bigint;
  /** Author of the target, credited by likes and collects; null when unknown (and for follows). */
  readonly authorId: bigint | null;
  /** Whether the user is a member after the change. */
  readonly member: boolean;
  /**
   * Grows with every change of the target, and across its rebuilds: a change made
   * after a rebuild outranks every change made before it. A store applies a change
   * only when it is newer than the last it applied for the same (target, relation, user).
   */
  readonly version: bigint;
  readonly at: Date;
}

/**
 * Views of a post counted in Redis by one flush, on their way to PostgreSQL. The
 * epoch's running total after the flush travels with them: PostgreSQL adds the
 * difference from the highest total it applied for the epoch, so repeats and
 * reordering count nothing twice.
 */
export interface ViewChange {
  readonly kind: "views";
  readonly target: Target;
  /** Views this flush added. */
  readonly count: number;
  /** Views of the epoch (version's) counted in Redis up to and including this flush. */
  readonly total: number;
  readonly version: bigint;
  readonly at: Date;
}

export type Change = RelationChange | ViewChange;

/** A change waiting in the outbox of a partition; `entryId` is the outbox's own id for it. */
export interface OutboxEntry {
  readonly partition: number;
  readonly entryId: string;
  readonly change: Change;
}

/** An outbox entry that cannot be read as a change: it goes to the dead-letter queue. */
export interface MalformedOutboxEntry {
  readonly partition: number;
  readonly entryId: string;
  readonly problem: string;
}

/** A target as PostgreSQL holds it, to put it back into Redis. */
export interface TargetSnapshot {
  /** Members of each relation of the target's type. */
  readonly members: Readonly<Partial<Record<Relation, readonly bigint[]>>>;
  /** Counters other than the membership counts, which are the numbers of members. */
  readonly counts: Counts;
  /** Sequence numbers of the derived counters' values in `counts`. */
  readonly seqs: Readonly<Partial<Record<CounterName, bigint>>>;
  /** Views PostgreSQL applied per earlier epoch of the target (a post's only). */
  readonly viewTotals: readonly { readonly epoch: bigint; readonly total: number }[];
  /** Highest version of a change PostgreSQL applied to the target (0 when none). */
  readonly version: bigint;
  /** The epoch the rebuilt target stamps its changes in: newer than every earlier one. */
  readonly epoch: bigint;
  /** Where the snapshot stands in PostgreSQL's commit order, for `SnapshotStore.changesSince`. */
  readonly mark: string;
}

/** The last change PostgreSQL applied for one user of a target's relation. */
export interface AppliedChange {
  readonly relation: Relation;
  readonly userId: bigint;
  readonly member: boolean;
  readonly version: bigint;
}

/** A change PostgreSQL holds as its pair's newest, and the transaction that committed it. */
export interface CommittedChange {
  readonly change: RelationChange;
  readonly txid: bigint;
}

/** The views PostgreSQL holds for an epoch of a post, and the transaction that last raised them. */
export interface CommittedViews {
  readonly target: Target;
  readonly epoch: bigint;
  readonly total: number;
  readonly txid: bigint;
}

/** What PostgreSQL did with a batch of changes. */
export interface AppliedChanges {
  /** Rows added to the relations' tables. */
  readonly inserted: number;
  /** Rows removed from them. */
  readonly deleted: number;
  /** Changes older than what PostgreSQL already holds for their (target, relation, user): skipped. */
  readonly superseded: number;
  /** The relation changes that passed: newer than what PostgreSQL held for their pair. */
  readonly passed: readonly RelationChange[];
  /**
   * The relation changes that are now their pair's newest in PostgreSQL, the passed
   * ones and those an earlier delivery applied, each with the transaction that
   * committed it: what a rebuilt target may still need replayed, and what users' lists settle on.
   */
  readonly current: readonly CommittedChange[];
  /** The views each (post, epoch) of the batch now holds in PostgreSQL. */
  readonly views: readonly CommittedViews[];
  /** The counter deltas committed, from the rows really inserted or deleted and the views added. */
  readonly deltas: readonly CounterDelta[];
  /**
   * The derived counters of everyone the batch's changes credit (authors, followers),
   * as they stand after the commit: what Redis must mirror, also after a redelivery.
   */
  readonly credits: readonly CounterValue[];
  /**
   * The like counts of the posts the batch's like changes name, per time bucket and
   * in all, as they stand after the commit: what the hot ranking mirrors, also after
   * a redelivery.
   */
  readonly ranked: RankedLikes;
}

/** A target's members of one relation as Redis holds them, for a reconcile pass. */
export interface RedisTarget {
  readonly relation: Relation;
  readonly target: Target;
  /** The relation's counter on the target. */
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

/** A target's members of one relation as PostgreSQL holds them, for a reconcile pass. */
export interface DatabaseTarget {
  /** The relation's counter. */
  readonly count: number;
  /** Its members, or null when there are more than a reconcile pass loads at once (compared in chunks). */
  readonly members: readonly bigint[] | null;
  /** Rows of the relation's table. */
  readonly rows: number;
  /** Highest version PostgreSQL applied to the target. */
  readonly version: bigint;
}

/** PostgreSQL's record of the newest change it applied to one user's membership of a target (relation_versions). */
export interface PairRecord {
  /** Whether the user is a member after that change. */
  readonly member: boolean;
  readonly version: bigint;
}

/** A target's relation only PostgreSQL may hold, as one page of a reconcile pass lists it. */
export interface DatabaseCount {
  readonly relation: Relation;
  readonly target: Target;
  /** The relation's counter (0 when there is no counter row). */
  readonly count: number;
  /** Rows of the relation's table. */
  readonly rows: number;
}

/**
 * A target's counters other than membership counts, as a reconcile pass compares
 * them: the derived ones as PostgreSQL's rows say (`truth`), its counter rows and
 * Redis hold them; a post's views as both stores hold them.
 */
export interface CounterSurvey {
  readonly target: Target;
  /** Per derived counter of the type: what PostgreSQL's rows count. */
  readonly truth: Readonly<Partial<Record<CounterName, number>>>;
  /** PostgreSQL's counter rows (0 when absent), with their sequence numbers. */
  readonly database: Readonly<Partial<Record<CounterName, { readonly value: number; readonly seq: bigint }>>>;
  /** Redis's values and sequence numbers, or null when Redis does not hold the target. */
  readonly redis: Readonly<Partial<Record<CounterName, { readonly value: number; readonly seq: bigint }>>> | null;
  /** Redis's version of the target (-1 when unknown) and PostgreSQL's newest, for views. */
  readonly redisVersion: bigint;
  readonly databaseVersion: bigint;
}

export type DifferenceKind =
  | "missingInDatabase"
  | "strayInDatabase"
  | "databaseCounter"
  | "redisCounter"
  /** A derived counter row that does not count PostgreSQL's rows. */
  | "derivedCounter"
  /** A derived counter Redis holds otherwise than PostgreSQL. */
  | "redisDerivedCounter"
  /** Views PostgreSQL holds otherwise than Redis, the target at rest. */
  | "views"
  /** A user's list of liked or collected posts that lists otherwise than PostgreSQL's rows. */
  | "list";

/** What a reconcile pass asks to be fixed; every repair is safe to repeat. */
export type Repair =
  | {
      /** Make PostgreSQL's members of the target's relation what Redis holds, then its counters their number. */
      readonly kind: "alignDatabase";
      readonly relation: Relation;
      readonly target: Target;
      /** Redis's version when compared: a pair changed since is left alone. */
      readonly observedVersion: bigint;
      readonly add: readonly bigint[];
      readonly remove: readonly bigint[];
    }
  | {
      /** Set PostgreSQL's counter of the target's relation to its number of rows. */
      readonly kind: "recountDatabase";
      readonly relation: Relation;
      readonly target: Target;
    }
  | {
      /** Set Redis's counter of the target's relation to its number of members, if unchanged since. */
      readonly kind: "recountRedis";
      readonly relation: Relation;
      readonly target: Target;
      readonly observedVersion: bigint;
    }
  | {
      /** Set PostgreSQL's derived counters of the target to what its rows count, then mirror them into Redis. */
      readonly kind: "recountDerived";
      readonly target: Target;
      readonly names: readonly CounterName[];
    }
  | {
      /** Mirror PostgreSQL's derived counters of the target into Redis as they stand. */
      readonly kind: "mirrorDerived";
      readonly target: Target;
      readonly names: readonly CounterName[];
    }
  | {
      /** Set PostgreSQL's views of a post to Redis's, if no change reached either store since. */
      readonly kind: "alignViews";
      readonly target: Target;
      readonly observedVersion: bigint;
      readonly views: number;
    };

export type RepairKind = Repair["kind"];

/**
 * Windows of the hot ranking (`hotPosts`): the posts that gained the most likes in
 * the last hour, day or week, by likes standing now whose time falls in the
 * window; ALL ranks by like count.
 */
export type HotWindow = "HOUR" | "DAY" | "WEEK" | "ALL";
export type BucketedWindow = Exclude<HotWindow, "ALL">;

/** Lengths of the time buckets a window sums, aligned on the Unix epoch: 5 minutes, 1 hour, 6 hours. */
export type BucketSpan = "m5" | "h1" | "h6";
export const bucketSpanMs: Readonly<Record<BucketSpan, number>> = { m5: 300_000, h1: 3_600_000, h6: 21_600_000 };

/** Each bucketed window and the span of its buckets; a span serves exactly one window. */
export const bucketedWindows = {
  HOUR: { span: "m5", lengthMs: 3_600_000 },
  DAY: { span: "h1", lengthMs: 86_400_000 },
  WEEK: { span: "h6", lengthMs: 7 * 86_400_000 },
} as const satisfies Record<BucketedWindow, { span: BucketSpan; lengthMs: number }>;

export const bucketedWindowNames = Object.keys(bucketedWindows) as BucketedWindow[];
export const bucketSpans = Object.keys(bucketSpanMs) as BucketSpan[];

/** The window whose buckets have this span. */
export function windowOfSpan(span: BucketSpan): BucketedWindow {
  return bucketedWindowNames.find((w) => bucketedWindows[w].span === span) as BucketedWindow;
}

/** Posts each ranking keeps (each bucket, each window, ALL): the memory bound. */
export const rankingCapacity = 1_000;
/** The most posts one `hotPosts` call answers. */
export const hotPostsLimit = 100;
/**
 * PostgreSQL keeps bucket rows this long after their start (the longest window, a
 * week, plus a bucket and a margin); a like older than that moves no bucket when unliked.
 */
export const bucketRetentionMs = 8 * 86_400_000;

export function bucketStart(span: BucketSpan, atMs: number): number {
  const size = bucketSpanMs[span];
  return Math.floor(atMs / size) * size;
}

/**
 * The starts of the buckets a window sums at `nowMs`, newest first: every bucket of
 * its span that overlaps (now − length, now]. So a window covers its length and at
 * most one bucket more (HOUR: 13 buckets of 5 minutes, 60–65 minutes).
 */
export function windowBuckets(window: BucketedWindow, nowMs: number): number[] {
  const { span, lengthMs } = bucketedWindows[window];
  const size = bucketSpanMs[span];
  const starts: number[] = [];
  for (let start = bucketStart(span, nowMs); start + size > nowMs - lengthMs; start -= size) starts.push(start);
  return starts;
}

/**
 * The buckets of each span whose rows Redis keeps at `nowMs`: those its window sums, and
 * the next one, for a like stamped by a clock a little ahead of this process's.
 */
export function keptBuckets(nowMs: number): ReadonlyMap<BucketSpan, ReadonlySet<number>> {
  return new Map(
    bucketedWindowNames.map((w) => {
      const { span } = bucketedWindows[w];
      return [span, new Set([bucketStart(span, nowMs) + bucketSpanMs[span], ...windowBuckets(w, nowMs)])];
    }),
  );
}

/** When a bucket has left its window for good: its end plus the window's length. */
export function bucketLeavesAt(span: BucketSpan, startMs: number): number {
  return startMs + bucketSpanMs[span] + bucketedWindows[windowOfSpan(span)].lengthMs;
}

/** Likes of a post given in one time bucket and standing now, with the sequence number of the row's last write. */
export interface BucketCount {
  readonly span: BucketSpan;
  readonly startMs: number;
  readonly postId: bigint;
  readonly likes: number;
  readonly seq: bigint;
}

/** What the hot ranking takes from PostgreSQL: bucket counts, and posts' like counts (ALL). */
export interface RankedLikes {
  readonly buckets: readonly BucketCount[];
  readonly totals: readonly CounterValue[];
}
