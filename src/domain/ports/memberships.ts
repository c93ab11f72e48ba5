// Joining and leaving a target's members in Redis: likes, collects, follows.
import type { Counts, Relation, Target } from "../model/index.js";

/** The result of a membership change in Redis. */
export type MembershipChange =
  | {
      readonly kind: "applied";
      readonly changed: boolean;
      /** The target's counts right after the change, from the same atomic step. */
      readonly counts: Counts;
      /** The change's version, when it changed something (a repeat answered from its receipt has none). */
      readonly version?: bigint;
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
