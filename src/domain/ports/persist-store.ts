// The persist step of the pipeline: a batch of changes into PostgreSQL, in one transaction.
import type { AppliedChanges, Change } from "../model/index.js";

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
