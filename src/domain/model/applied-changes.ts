// What PostgreSQL holds and did: a target's snapshot to rebuild it from, and what a
// persisted batch of changes applied.
import type { RelationChange } from "./changes.js";
import type { CounterDelta, CounterName, CounterValue, Counts } from "./counts.js";
import type { RankedLikes } from "./hot-windows.js";
import type { Relation } from "./relations.js";
import type { Target } from "./targets.js";

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
