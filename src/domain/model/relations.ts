// What a user can be a member of (likes, collects, follows), on which targets, and
// which relations each user sees as a list of their own.
import type { Target, TargetType } from "./targets.js";

/**
 * What a user can be a member of: the likers of a post or comment, the collectors
 * of a post, the followers of a user. Each relation counts its members on the
 * target (`counter`) and credits someone else once a change is persisted
 * (`credit`): the target's author, or the member themself (a follower's
 * `following`). Credits live in another Redis slot than the target, so they move
 * after PostgreSQL committed the change, from the value it committed.
 */
export type Relation = "like" | "collect" | "follow";

export const relations = {
  like: { targets: ["post", "comment"], counter: "like", credit: { to: "author", name: "likesReceived" } },
  collect: { targets: ["post"], counter: "collect", credit: { to: "author", name: "collectsReceived" } },
  follow: { targets: ["user"], counter: "followers", credit: { to: "member", name: "following" } },
} as const satisfies Record<Relation, { targets: readonly TargetType[]; counter: string; credit: { to: "author" | "member"; name: string } }>;

export const relationNames = Object.keys(relations) as Relation[];

/** The relations a target of this type has members of, in a fixed order. */
export function relationsOf(type: TargetType): readonly Relation[] {
  return relationsByType[type];
}

const relationsByType: Record<TargetType, readonly Relation[]> = {
  post: relationNames.filter((r) => (relations[r].targets as readonly TargetType[]).includes("post")),
  comment: relationNames.filter((r) => (relations[r].targets as readonly TargetType[]).includes("comment")),
  user: relationNames.filter((r) => (relations[r].targets as readonly TargetType[]).includes("user")),
};

export function isRelationTarget(relation: Relation, target: Target): boolean {
  return (relations[relation].targets as readonly TargetType[]).includes(target.type);
}

/** The relations whose newest members each user sees in a list of their own (`likedPosts`, `collectedPosts`). */
export type ListedRelation = "like" | "collect";
export const listedRelations: readonly ListedRelation[] = ["like", "collect"];
/** Entries of a user's list that Redis keeps; older ones are read from PostgreSQL. */
export const listCapacity = 100;
