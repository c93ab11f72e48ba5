// What PostgreSQL holds of relations: pages of members, the batches of changes it
// persists, and snapshots to rebuild a target from.
import type {
  AppliedChange,
  AppliedChanges,
  Change,
  CounterValue,
  Counts,
  ListPosition,
  MemberPosition,
  Relation,
  Target,
  TargetSnapshot,
  TargetType,
} from "../model/index.js";

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

/** Pages of who is a member of what, read from PostgreSQL's relation tables. */
export interface MemberPageStore {
  /** The members each request asks for, in order, with one query for them all. */
  members(requests: readonly MembersRequest[]): Promise<MemberPosition[][]>;
  /** What each user is a member of, per request in order, with one query for them all. */
  memberships(requests: readonly MembershipsRequest[]): Promise<ListPosition[][]>;
}

/** The persist step of the pipeline: a batch of changes into PostgreSQL. */
export interface PersistStore {
  /**
   * Applies a batch of changes in one transaction. Relation changes (at most one
   * per target, relation and user) pass only when their version is newer than
   * the last applied for their pair, and move the relation tables' rows; counters
   * move by the rows really inserted or deleted; view changes add what their
   * totals add to the epoch's highest; the credited users' counters and the hot
   * ranking's buckets follow. Answers what it committed.
   */
  apply(changes: readonly Change[]): Promise<AppliedChanges>;
}

/** What committed to a target after a snapshot of it. */
export interface CommittedSince {
  /** The applied change of each (relation, user) whose change committed after the snapshot, whatever its version. */
  readonly changes: readonly AppliedChange[];
  /** The views of each epoch whose total rose after the snapshot. */
  readonly views: readonly { readonly epoch: bigint; readonly total: number }[];
  /**
   * The target's derived counters as they stand now, with their sequence numbers: one
   * mirrored between the snapshot and the load's hash found no hash and was left.
   */
  readonly derived: readonly CounterValue[];
}

export interface SnapshotStore {
  /**
   * Targets' members, counters and applied versions as of one moment, in order,
   * each with a new epoch: one transaction of a few statements whatever their number.
   */
  read(targets: readonly Target[]): Promise<TargetSnapshot[]>;
  /** What committed to each target after the snapshot `mark`, whatever its version, and its derived counters now, in order: one statement. */
  changesSince(targets: readonly Target[], mark: string): Promise<CommittedSince[]>;
  /** The newest version PostgreSQL applied to the target, or the start of its last epoch if later (0 when none). */
  newestVersion(target: Target): Promise<bigint>;
  /**
   * The version of the newest change PostgreSQL applied to the target (0 when none): what
   * a wait for changes in flight compares with, since a load's new epoch says nothing of them.
   */
  newestChange(target: Target): Promise<bigint>;
  /** Whether transaction `txid` had committed when the snapshot `mark` was taken. */
  sawCommit(mark: string, txid: bigint): boolean;
}

/**
 * What PostgreSQL holds of targets Redis does not: the counters the pipeline
 * committed (in the transaction that wrote the changes' rows) and a user's
 * memberships. One statement each for a whole page, no transaction, nothing loaded.
 */
export interface PersistedViews {
  /** Each target's counts in order; a counter with no row is absent (read as 0). */
  counts(targets: readonly Target[]): Promise<Counts[]>;
  /** Per target in order, whether `userId` is a member of each relation asked that its type has. */
  memberships(userId: bigint, targets: readonly Target[], relations: readonly Relation[]): Promise<Partial<Record<Relation, boolean>>[]>;
}

/** The newest change PostgreSQL applied to pairs (target, relation, user). */
export interface PairVersions {
  /** Per pair in order, the version of the newest change applied to it, or null when none. */
  newest(pairs: readonly { readonly target: Target; readonly relation: Relation; readonly userId: bigint }[]): Promise<(bigint | null)[]>;
}
