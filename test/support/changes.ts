import type { LikeChange } from "../../src/domain/model.js";

/** A like change of a post by author 3, at one fixed moment. */
export const likeChange = (userId: bigint, version: bigint, liked: boolean, targetId = 1n): LikeChange => ({
  target: { type: "post", id: targetId },
  userId,
  authorId: 3n,
  liked,
  version,
  at: new Date("2026-11-22T10:00:00.000Z"),
});
