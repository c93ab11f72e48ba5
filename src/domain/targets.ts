// What can be liked and counted, and the one string form used as a cache key.

export type TargetType = "post" | "comment" | "user";

export interface Target {
  readonly type: TargetType;
  readonly id: bigint;
}

/** "post:123": the key of a target in maps and DataLoaders. */
export type TargetKey = `${TargetType}:${string}`;

export function targetKey(target: Target): TargetKey {
  return `${target.type}:${target.id}`;
}

/** The counter names each kind of target carries; any other reads as absent. */
export const counterNames = {
  post: ["like", "read", "comment", "collect"],
  comment: ["like", "reply"],
  user: ["followers", "following", "posts", "likesReceived", "collectsReceived"],
} as const satisfies Record<TargetType, readonly string[]>;

export type CounterName<T extends TargetType = TargetType> = (typeof counterNames)[T][number];

/** Counter values of one target; a counter never touched reads 0. */
export type Counts = Readonly<Record<string, number>>;

export function countOf(counts: Counts, name: string): number {
  return counts[name] ?? 0;
}
