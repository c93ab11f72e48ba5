import type { Relation, RelationChange } from "../../src/domain/model/index.js";

/** A change of a post's relation (a like by default), of a post by author 3, at one fixed moment. */
export const relationChange = (userId: bigint, version: bigint, member: boolean, targetId = 1n, relation: Relation = "like"): RelationChange => ({
  kind: "relation",
  relation,
  target: { type: "post", id: targetId },
  userId,
  authorId: 3n,
  member,
  version,
  at: new Date("2026-11-22T10:00:00.000Z"),
});
