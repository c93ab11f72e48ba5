// Pages of who is a member of what, as PostgreSQL's relation tables hold them.
import type { ListPosition, MemberPosition, Relation, Target, TargetType } from "../model/index.js";

/** One target's page of members of a relation: at most `limit`, newest first, strictly after `after` when given. */
export interface MembersRequest {
  readonly relation: Relation;
  readonly target: Target;
  readonly limit: number;
  readonly after: MemberPosition | null;
}

/**
 * One user's page of what they are a member of in a relation (the posts they liked
 * or collected, the users they follow): at most `limit`, newest first, strictly
 * after `after` when given, leaving out the targets in `skip`.
 */
export interface MembershipsRequest {
  readonly relation: Relation;
  /** The type of target listed (a user's likes of posts, not of comments). */
  readonly targetType: TargetType;
  readonly userId: bigint;
  readonly limit: number;
  readonly after: ListPosition | null;
  readonly skip: ReadonlySet<bigint>;
}

/** Pages of who is a member of what, read from PostgreSQL's relation tables. */
export interface MemberPageStore {
  /** The members each request asks for, in order, with one query for them all. */
  members(requests: readonly MembersRequest[]): Promise<MemberPosition[][]>;
  /** What each user is a member of, per request in order, with one query for them all. */
  memberships(requests: readonly MembershipsRequest[]): Promise<ListPosition[][]>;
}
