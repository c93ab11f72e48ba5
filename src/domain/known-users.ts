// Which user ids exist, held in process memory as sorted runs of consecutive ids.
// Ids come from a PostgreSQL sequence and users are never deleted, so a few runs
// cover millions of users: memory grows with the gaps between ids (an insert that
// failed burns a sequence value), not with the users. Asking whether a user exists
// allocates nothing, so the question can sit on every signed-in request.
import type { IdRun } from "./model/index.js";

/**
 * Ids are held as doubles, exact up to 2^53 − 1, which a sequence reaches after
 * nine quadrillion users. A larger id, or one below 1, is never held: asking about
 * one answers false, which sends the caller to PostgreSQL as for any id not known here.
 */
const largestHeld = BigInt(Number.MAX_SAFE_INTEGER);

export class KnownUsers {
  /** Set once every user that existed when loading began has been added. */
  loaded = false;
  // Run i holds firsts[i]..lasts[i]. Runs ascend and neither overlap nor touch:
  // lasts[i] + 1 < firsts[i + 1], so one binary search finds the only run that may hold an id.
  private firsts: Float64Array;
  private lasts: Float64Array;
  private count = 0;

  constructor(initialRuns = 64) {
    this.firsts = new Float64Array(Math.max(1, initialRuns));
    this.lasts = new Float64Array(Math.max(1, initialRuns));
  }

  /** How many runs of consecutive ids are held: what memory grows with (16 bytes each). */
  get runs(): number {
    return this.count;
  }

  /** How many ids are held. */
  get ids(): number {
    let total = 0;
    for (let i = 0; i < this.count; i++) total += this.lasts[i]! - this.firsts[i]! + 1;
    return total;
  }

  has(id: bigint): boolean {
    if (id < 1n || id > largestHeld) return false;
    const value = Number(id);
    const i = this.firstEndingFrom(value);
    return i < this.count && this.firsts[i]! <= value;
  }

  add(id: bigint): void {
    this.addRun(id, id);
  }

  /** Adds runs in any order, overlapping what is held or not. */
  addRuns(runs: readonly IdRun[]): void {
    for (const run of runs) this.addRun(run.first, run.last);
  }

  private addRun(from: bigint, to: bigint): void {
    if (from > to) throw new RangeError(`A run of user ids must end at or after its start; got ${from}..${to}.`);
    if (to < 1n || from > largestHeld) return;
    const first = Number(from < 1n ? 1n : from);
    const last = Number(to > largestHeld ? largestHeld : to);
    const n = this.count;
    // The common cases: a new highest id, after a gap or next to the last run; an id the last run holds.
    if (n === 0 || first > this.lasts[n - 1]! + 1) return this.insertAt(n, first, last);
    if (first >= this.firsts[n - 1]!) {
      this.lasts[n - 1] = Math.max(this.lasts[n - 1]!, last);
      return;
    }
    // Runs [touching, beyond) overlap or touch first..last: they become one.
    const touching = this.firstEndingFrom(first - 1);
    const beyond = this.firstStartingAbove(last + 1);
    if (touching === beyond) return this.insertAt(touching, first, last);
    this.firsts[touching] = Math.min(first, this.firsts[touching]!);
    this.lasts[touching] = Math.max(last, this.lasts[beyond - 1]!);
    const merged = beyond - touching - 1;
    if (merged > 0) {
      this.firsts.copyWithin(touching + 1, beyond, n);
      this.lasts.copyWithin(touching + 1, beyond, n);
      this.count -= merged;
    }
  }

  private insertAt(at: number, first: number, last: number): void {
    if (this.count === this.firsts.length) {
      this.firsts = grown(this.firsts);
      this.lasts = grown(this.lasts);
    }
    if (at < this.count) {
      this.firsts.copyWithin(at + 1, at, this.count);
      this.lasts.copyWithin(at + 1, at, this.count);
    }
    this.firsts[at] = first;
    this.lasts[at] = last;
    this.count++;
  }

  /** The first run whose last id is `value` or above; `count` when none is. */
  private firstEndingFrom(value: number): number {
    let low = 0;
    let high = this.count;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (this.lasts[mid]! < value) low = mid + 1;
      else high = mid;
    }
    return low;
  }

  /** The first run whose first id is above `value`; `count` when none is. */
  private firstStartingAbove(value: number): number {
    let low = 0;
    let high = this.count;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (this.firsts[mid]! <= value) low = mid + 1;
      else high = mid;
    }
    return low;
  }
}

function grown(array: Float64Array): Float64Array {
  const bigger = new Float64Array(array.length * 2);
  bigger.set(array);
  return bigger;
}
