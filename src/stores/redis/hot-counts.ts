// Counts of the targets an API process reads most, kept in its memory: a feed of
// posts read a moment ago answers their counts without Redis. Exact within a bound:
// an entry goes as soon as Redis tells of a write to its counter hash
// (count-invalidations.ts), and entries are served only while every write older
// than `maxStalenessMs` is known to have been heard. What it trades: a count seen
// through another process may lag a change by up to that bound (about a
// millisecond at rest); a viewer's own memberships never come from here, and a
// mutation's payload comes from the change itself.
//
// A read that fills an entry can race a write: the write's invalidation may arrive
// before the read's reply, and the reply would then put back a value already stale.
// Targets being read are marked; an invalidation of a marked target (or of
// everything) spoils the fill, and the reply is used for the request but not kept.
//
// Entries are keyed by a number made of the target's type and id, and the oldest
// filled goes first: a feed looks up 100 targets, and lru-cache's get over the
// counter hashes' names (a string built and hashed per lookup, then the recency
// list moved) was about 5% of a feed's API CPU.
import type { Relation, Target, TargetType } from "../../domain/model/index.js";
import type { CountInvalidations } from "./count-invalidations.js";

/** What an entry holds of a counter hash: its counters and each relation's newest membership generation. */
export interface HotTarget {
  readonly counts: Readonly<Record<string, number>>;
  readonly generations: Readonly<Partial<Record<Relation, number>>>;
}

export interface HotCountsStats {
  /** Targets answered from memory. */
  readonly hits: number;
  /** Targets read from Redis. */
  readonly misses: number;
  /** Entries dropped because Redis told of a write. */
  readonly invalidations: number;
  readonly entries: number;
}

export interface HotCountsOptions {
  readonly invalidations: CountInvalidations;
  /** The target a counter hash's name belongs to, or null for any other key (keys.ts). */
  readonly targetOf: (key: string) => Target | null;
  /** Counter hashes kept at most; the oldest filled go first. */
  readonly maxTargets: number;
  /** How old the newest confirmation of what was heard may be for entries to be served. */
  readonly maxStalenessMs: number;
  /** A monotonic clock in ms; performance.now() by default. */
  readonly nowMs?: () => number;
}

/** A read in flight for some targets: `keep` stores what it read unless a write was heard meanwhile; `end` releases it. */
export interface Fill {
  keep(target: Target, held: HotTarget): void;
  end(): void;
}

const typeNumbers: Readonly<Record<TargetType, number>> = { post: 0, comment: 1, user: 2 };
/** Ids up to this make an exact key (id × 4 + type stays below 2^53); larger ones are never held. */
const largestKeyedId = BigInt(Math.floor(Number.MAX_SAFE_INTEGER / 4));

/** A target's key in the maps, or -1 when its id is too large to key exactly. */
const keyOf = (target: Target): number => (target.id <= largestKeyedId ? Number(target.id) * 4 + typeNumbers[target.type] : -1);

export class HotCounts {
  /** In the order filled: the first is the oldest. */
  private readonly entries = new Map<number, HotTarget>();
  /** Targets being read, with whether a write to them was heard since the read was sent. */
  private readonly reading = new Map<number, { readers: number; spoiled: boolean }>();
  private readonly nowMs: () => number;
  private hits = 0;
  private misses = 0;
  private invalidations = 0;
  private served: (confirmationAgeMs: number) => void = () => {};

  constructor(private readonly options: HotCountsOptions) {
    this.nowMs = options.nowMs ?? (() => performance.now());
    options.invalidations.onInvalidate((key) => {
      if (key === null) return this.forgetAll();
      const target = options.targetOf(key);
      if (target) this.forget(keyOf(target));
    });
  }

  /**
   * Whether entries may be served now: every write Redis ran more than
   * `maxStalenessMs` ago has been heard. Asked once per read of many targets.
   */
  servable(): boolean {
    const age = this.nowMs() - this.options.invalidations.confirmedAt();
    if (age > this.options.maxStalenessMs) return false;
    this.served(age);
    return true;
  }

  /** Sees how old the newest confirmation was each time entries were served: the staleness bound of what they answered. */
  onServed(observe: (confirmationAgeMs: number) => void): void {
    this.served = observe;
  }

  /** The entry of a target, or undefined; counted as a hit or a miss. */
  get(target: Target): HotTarget | undefined {
    const found = this.entries.get(keyOf(target));
    if (found) this.hits++;
    else this.misses++;
    return found;
  }

  /** The entry as held now, without counting it: whether an entry served is still the one held. */
  peek(target: Target): HotTarget | undefined {
    return this.entries.get(keyOf(target));
  }

  /** Counts targets read from Redis without looking here (entries not servable, a read that must be exact). */
  missed(targets: number): void {
    this.misses += targets;
  }

  /** Marks `targets` as being read: call before the read is sent. */
  fill(targets: readonly Target[]): Fill {
    // Kept only if every node was listening when the read was sent: a listener lost or
    // re-armed meanwhile spoils every read in flight (forgetAll).
    const listening = this.options.invalidations.listening();
    const marked = targets.map(keyOf);
    for (const key of marked) {
      const mark = this.reading.get(key);
      if (mark) mark.readers++;
      else this.reading.set(key, { readers: 1, spoiled: false });
    }
    let ended = false;
    return {
      keep: (target, held) => {
        const key = keyOf(target);
        if (ended || !listening || key < 0 || this.reading.get(key)?.spoiled !== false) return;
        if (!this.entries.has(key) && this.entries.size >= this.options.maxTargets) {
          const oldest = this.entries.keys().next();
          if (!oldest.done) this.entries.delete(oldest.value);
        }
        this.entries.set(key, held);
      },
      end: () => {
        if (ended) return;
        ended = true;
        for (const key of marked) {
          const mark = this.reading.get(key);
          if (mark && --mark.readers === 0) this.reading.delete(key);
        }
      },
    };
  }

  /**
   * Resolves once every write Redis ran before the call has been heard (see
   * CountInvalidations.barrier); rejects when that takes longer than the bound (a
   * listener held back), so a caller waits no longer than it and reads Redis instead.
   */
  barrier(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("the listeners of counter writes did not confirm in time")), this.options.maxStalenessMs);
      this.options.invalidations.barrier().then(
        () => {
          clearTimeout(timer);
          resolve();
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error instanceof Error ? error : new Error(String(error)));
        },
      );
    });
  }

  stats(): HotCountsStats {
    return { hits: this.hits, misses: this.misses, invalidations: this.invalidations, entries: this.entries.size };
  }

  /**
   * This process changed the target (a like's script answered): its entry goes
   * now, so a read this process serves after the change shows it, without
   * waiting for Redis to tell.
   */
  changed(target: Target): void {
    this.forget(keyOf(target));
  }

  private forget(key: number): void {
    const mark = this.reading.get(key);
    if (mark) mark.spoiled = true;
    if (this.entries.delete(key)) this.invalidations++;
  }

  private forgetAll(): void {
    for (const mark of this.reading.values()) mark.spoiled = true;
    this.invalidations += this.entries.size;
    this.entries.clear();
  }
}
