// The changes this process acknowledged lately, kept a while in case a Redis failover
// takes them back before anything else holds them. Redis copies a primary's writes to
// its replicas, and the relay reads them, only after the primary answered: a change
// acknowledged in the primary's last moments may reach neither. Only the process that
// acknowledged it still knows it: it appends them to PostgreSQL itself when its
// connection to Redis closes, and after a failover asks PostgreSQL whether each
// change it acknowledged under the old history arrived (lost-changes.ts).
//
// A ring of fixed size: recording costs no allocation beyond the entry, and memory
// stays bounded however fast likes come (50,000 entries, a few MB, cover ten seconds
// of 5,000 likes/s per process; a failover loses at most the replication lag, well
// under a second).
import { performance } from "node:perf_hooks";
import type { Relation, Target } from "./model/index.js";

export interface AcknowledgedChange {
  readonly target: Target;
  readonly relation: Relation;
  readonly userId: bigint;
  /** Whether the user is a member after it. */
  readonly member: boolean;
  readonly version: bigint;
  /** When it was acknowledged, on this process's wall clock: when the user joined or left, should it be appended again. */
  readonly at: Date;
  /** When it was acknowledged, on this process's monotonic clock (performance.now()). */
  readonly atMs: number;
}

export class AcknowledgedChanges {
  private readonly ring: (AcknowledgedChange | undefined)[];
  private next = 0;

  constructor(
    capacity = 50_000,
    /** How long a change is kept at most. */
    private readonly keepMs = 60_000,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.ring = new Array<AcknowledgedChange | undefined>(capacity);
  }

  record(change: Omit<AcknowledgedChange, "atMs" | "at">): void {
    this.ring[this.next] = { ...change, at: new Date(), atMs: this.now() };
    this.next = (this.next + 1) % this.ring.length;
  }

  /** Per (target, relation, user), the newest change acknowledged before `atMs` and within the last `keepMs`. */
  before(atMs: number): AcknowledgedChange[] {
    return this.within(this.now() - this.keepMs, atMs);
  }

  /** Per (target, relation, user), the newest change acknowledged from `fromMs` until before `toMs`, within the last `keepMs`. */
  within(fromMs: number, toMs: number): AcknowledgedChange[] {
    const newest = new Map<string, AcknowledgedChange>();
    const oldest = Math.max(fromMs, this.now() - this.keepMs);
    for (const change of this.ring) {
      if (!change || change.atMs >= toMs || change.atMs < oldest) continue;
      const key = `${change.target.type}:${change.target.id}:${change.relation}:${change.userId}`;
      const kept = newest.get(key);
      if (!kept || change.version > kept.version) newest.set(key, change);
    }
    return [...newest.values()];
  }
}
