// Putting a target back into Redis from PostgreSQL, and the changes that land meanwhile.
import type { AppliedChange, Target, TargetSnapshot } from "../model/index.js";

export interface RebuildMark {
  readonly epoch: bigint;
  /** The lowest version the epoch stamps. */
  readonly epochStart: bigint;
  readonly mark: string;
}

/** What a persist batch reads of a target Redis holds. */
export interface HeldTarget {
  /** The version it last stamped. */
  readonly version: bigint;
  readonly rebuild: RebuildMark | null;
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

/**
 * Whether Redis holds a target: in its node's replication history, not at all, or
 * from another history (suspect: a failover or a restart may have taken changes
 * back), with the version it last stamped and the history its node follows now.
 */
export type Holding = "held" | "absent" | { readonly suspectAt: bigint; readonly nodeHistory: string };

/** What writing a snapshot did: wrote the target, found it held already, or found the lock gone (nothing written). */
export type RebuildWrite = "written" | "held" | "lockLost";

export interface RebuildStore {
  /**
   * Takes the target's rebuild lock for `ttlMs`; the token to release it, or null when another
   * process holds it. With `token`, the lock is also the caller's when it already holds that token
   * (an earlier acquire whose answer was lost).
   */
  lock(target: Target, ttlMs: number, token?: string): Promise<string | null>;
  unlock(target: Target, token: string): Promise<void>;
  /**
   * Whether Redis holds each target (its counter hash), in order, and whether it holds
   * it from another replication history than its node's (see Holding).
   */
  held(targets: readonly Target[]): Promise<Holding[]>;
  /**
   * Takes a suspect target into its node's history, when it still stamped `version`
   * last: the caller found PostgreSQL holds nothing newer. False when it moved meanwhile.
   */
  adopt(target: Target, version: bigint): Promise<boolean>;
  /**
   * Writes the target from a PostgreSQL snapshot under the rebuild lock `token`. The counter
   * hash, written last, marks it ready: never written once the lock is not the caller's.
   */
  write(target: Target, snapshot: TargetSnapshot, authorId: bigint | null, token: string): Promise<RebuildWrite>;
  /**
   * Brings a change PostgreSQL applied late into a rebuilt target. "tooLate": it
   * came after the rebuild window, when Redis no longer knows what superseded it.
   */
  replay(change: LateChange): Promise<"replayed" | "unchanged" | "tooLate">;
  /** Brings late views into a rebuilt post: what the total adds to what the post already has of its epoch. */
  replayViews(views: LateViews): Promise<"replayed" | "unchanged" | "tooLate">;
  /**
   * Of each target Redis holds: the version it last stamped, and since a rebuild, the
   * lowest version its epoch stamps (a change below it was made before the rebuild)
   * and the rebuild's snapshot mark (what PostgreSQL had committed; null when never
   * rebuilt). Null for a target not held.
   */
  rebuilds(targets: readonly Target[]): Promise<(HeldTarget | null)[]>;
  /**
   * Takes a target out of Redis whole, to come back by a rebuild. Only small
   * targets whose changes PostgreSQL has all applied (`persistedVersion`) leave.
   */
  evict(target: Target, persistedVersion: bigint): Promise<"evicted" | "absent" | "kept">;
  /** Takes a target out of Redis whole whatever it holds, to come back by a rebuild (changes in flight are replayed into it). */
  drop(target: Target): Promise<"evicted" | "absent" | "kept">;
  /** drop, only while the target is suspect (see held): one loaded again meanwhile is "kept". */
  dropSuspect(target: Target): Promise<"evicted" | "absent" | "kept">;
  /** The version a target dropped within the last hour had last stamped, or null (also when it stamped none since its load). */
  droppedVersion(target: Target): Promise<bigint | null>;
  /** droppedVersion of many targets, in order, in one round trip. */
  droppedVersions(targets: readonly Target[]): Promise<(bigint | null)[]>;
  /** lock of many targets, in order, in one round trip; each with its token when given. */
  lockMany(targets: readonly Target[], ttlMs: number, tokens: readonly string[]): Promise<(string | null)[]>;
  /** unlock of many targets, in order, in one round trip. */
  unlockMany(targets: readonly Target[], tokens: readonly string[]): Promise<void>;
}
