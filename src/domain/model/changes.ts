// Changes on their way from Redis, where they happen, to PostgreSQL, and the outbox
// entries that carry them.
import type { Relation } from "./relations.js";
import type { Target } from "./targets.js";

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
