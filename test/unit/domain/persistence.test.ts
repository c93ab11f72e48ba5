import { describe, expect, it } from "vitest";
import { coalesce } from "../../../src/domain/persistence.js";
import { likeChange as change } from "../../support/changes.js";

describe("like changes", () => {
  it("when changes of one pair arrive in any order, then coalescing keeps the newest version", () => {
    const history = [change(1n, 5n, true), change(1n, 9n, false), change(1n, 7n, true), change(2n, 4n, true), change(1n, 9n, false, 2n)];
    const kept = coalesce(history);
    expect(kept).toHaveLength(3);
    expect(kept.find((c) => c.userId === 1n && c.target.id === 1n)).toMatchObject({ version: 9n, liked: false });
    expect(coalesce([...history].reverse())).toEqual(expect.arrayContaining(kept));
  });
});
