// Snapshots of targets in PostgreSQL, to rebuild them in Redis from, and what committed after one.
import type { AppliedChange, CounterValue, Target, TargetSnapshot } from "../model/index.js";

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
