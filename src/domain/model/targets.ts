// What can be liked or counted, and how a target is named in maps.

/** What can be liked or counted. */
export type TargetType = "post" | "comment" | "user";

/** The kinds of target a user can like. */
export type LikeableType = Exclude<TargetType, "user">;

export interface Target {
  readonly type: TargetType;
  readonly id: bigint;
}

export interface LikeableTarget extends Target {
  readonly type: LikeableType;
}

/** "post:123": the key of a target in maps. */
export type TargetKey = `${TargetType}:${string}`;

export function targetKey(target: Target): TargetKey {
  return `${target.type}:${target.id}`;
}

export function isLikeable(target: Target): target is LikeableTarget {
  return target.type === "post" || target.type === "comment";
}
