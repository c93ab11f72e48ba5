// Counts as Redis holds them: read per target, with the viewer's memberships.
import type { CounterName, CounterValue, Counts, Relation, Target, TargetReadout } from "../model/index.js";

/** What to read of targets of one type. */
export interface ReadoutRequest {
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
  readout(targets: readonly Target[], request: ReadoutRequest): Promise<(TargetReadout | null)[]>;
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
