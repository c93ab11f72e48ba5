// The like use case's error mapping, with a stand-in store: this tests no Redis behaviour.
import { describe, expect, it } from "vitest";
import type { CounterService } from "../../../src/domain/counters.js";
import { createLikeService } from "../../../src/domain/likes.js";
import type { LikeHistoryStore, LikeStore } from "../../../src/domain/ports.js";
import { TargetFullError } from "../../../src/errors.js";

describe("like errors", () => {
  it("when a target holds the most likers it can, then liking it is FORBIDDEN, not an internal error", async () => {
    const full = async () => {
      throw new TargetFullError({ type: "post", id: 1n });
    };
    const likes = createLikeService({
      likeStore: { like: full, unlike: full } as unknown as LikeStore,
      likeHistory: {} as LikeHistoryStore,
      counters: {} as CounterService,
    });
    await expect(likes.like({ type: "post", id: 1n }, 2n)).rejects.toMatchObject({ code: "FORBIDDEN", message: expect.stringMatching(/no more likes/) });
  });
});
