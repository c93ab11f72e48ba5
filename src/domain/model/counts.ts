// The counters each kind of target carries, which of them PostgreSQL derives, and the
// values and changes of counters as both stores apply them.
import type { Relation } from "./relations.js";
import type { Target, TargetType } from "./targets.js";

/** The counter names each kind of target carries, the first being the one a new target starts with. */
export const counterNames = {
  post: ["like", "read", "comment", "collect"],
  comment: ["like", "reply"],
  user: ["followers", "following", "posts", "likesReceived", "collectsReceived"],
} as const satisfies Record<TargetType, readonly string[]>;

export type CounterName<T extends TargetType = TargetType> = (typeof counterNames)[T][number];

/**
 * Counters PostgreSQL derives from its own rows and Redis mirrors (a post's
 * comments, a comment's replies, a user's posts and credits): Redis takes them
 * as absolute values with PostgreSQL's sequence number, never as deltas, so a
 * repeated or late write cannot move them twice or backwards. The others move
 * in Redis first (membership counts, views) and reach PostgreSQL by the pipeline.
 */
export const derivedCounters = {
  post: ["comment"],
  comment: ["reply"],
  user: ["posts", "likesReceived", "collectsReceived", "following"],
} as const satisfies Record<TargetType, readonly string[]>;

export function isDerivedCounter(type: TargetType, name: string): boolean {
  return (derivedCounters[type] as readonly string[]).includes(name);
}

/** Counter values of one target; a counter never touched is absent and reads 0. */
export type Counts = Readonly<Partial<Record<CounterName, number>>>;

export function countOf(counts: Counts, name: CounterName): number {
  return counts[name] ?? 0;
}

export function isCounterName(type: TargetType, name: string): name is CounterName {
  return (counterNames[type] as readonly string[]).includes(name);
}

/** Every counter of the target's type at zero. */
export function zeroCounts(type: TargetType): Counts {
  return Object.fromEntries(counterNames[type].map((name) => [name, 0]));
}

/** What a feed shows of a target beside its row: its counts, and the viewer's memberships. */
export interface TargetReadout {
  readonly counts: Counts;
  /**
   * Whether the viewer is a member, for each relation of the target's type that was
   * read (all of them unless the view came from a change of one relation); false
   * without a viewer.
   */
  readonly viewerIn: Readonly<Partial<Record<Relation, boolean>>>;
}

/** A counter's value as PostgreSQL committed it, and the sequence number of that write. */
export interface CounterValue {
  readonly target: Target;
  readonly name: CounterName;
  readonly value: number;
  readonly seq: bigint;
}

/** A change to one counter, as PostgreSQL and Redis both apply it. */
export interface CounterDelta {
  readonly target: Target;
  readonly name: CounterName;
  readonly delta: number;
}
