// What one reconcile pass found and did, as its phases (reconcile-phases.ts) add
// to it; the pass turns it into its summary at the end.
import type { DifferenceKind, Target } from "../domain/model/index.js";

/** How many targets of a kind, and the first few of them ("post:12"), for an operator to look at. */
export interface TargetTally {
  readonly count: number;
  readonly sample: readonly string[];
}

/** Targets, or lists, a log line names at most: enough to start looking, not the whole set. */
export const sampleSize = 10;

/** Targets of one kind: all of them counted, the first `sampleSize` named. */
export class SampledTargets {
  count = 0;
  private readonly sample: string[] = [];

  add(target: Target): void {
    this.count++;
    if (this.sample.length < sampleSize) this.sample.push(`${target.type}:${target.id}`);
  }

  get value(): TargetTally {
    return { count: this.count, sample: this.sample };
  }
}

/** Every kind of difference, none found: the kinds' one list, which the compiler keeps complete. */
export function noDifferences(): Record<DifferenceKind, number> {
  return {
    missingInDatabase: 0,
    strayInDatabase: 0,
    databaseCounter: 0,
    redisCounter: 0,
    derivedCounter: 0,
    redisDerivedCounter: 0,
    views: 0,
    list: 0,
  };
}

export class ReconcileTally {
  /** Relations of targets compared, on the Redis side and the PostgreSQL side alike. */
  targetsChecked = 0;
  walked = 0;
  listsChecked = 0;
  repairsSent = 0;
  evicted = 0;
  readonly differences: Record<DifferenceKind, number> = noDifferences();
  readonly inFlight = new SampledTargets();
  readonly stuck = new SampledTargets();
  readonly rebuiltBehind = new SampledTargets();
  readonly behindKept = new SampledTargets();

  countDifferences(found: Partial<Record<DifferenceKind, number>>): void {
    for (const [kind, n] of Object.entries(found)) this.differences[kind as DifferenceKind] += n;
  }
}
