// What PostgreSQL holds of targets Redis does not: their counts, a user's memberships,
// and the newest change applied to each pair.
import type { Counts, Relation, Target } from "../model/index.js";

/**
 * What PostgreSQL holds of targets Redis does not: the counters the pipeline
 * committed (in the transaction that wrote the changes' rows) and a user's
 * memberships. One statement each for a whole page, no transaction, nothing loaded.
 */
export interface PersistedCounts {
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
