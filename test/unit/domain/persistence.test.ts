import { describe, expect, it } from "vitest";
import { coalesce } from "../../../src/domain/persistence.js";
import { relationChange as change } from "../../support/changes.js";

describe("coalescing changes", () => {
  it("when changes of one pair arrive in any order, then coalescing keeps the newest version, per relation", () => {
    const history = [
      change(1n, 5n, true),
      change(1n, 9n, false),
      change(1n, 7n, true),
      change(2n, 4n, true),
      change(1n, 9n, false, 2n),
      change(1n, 3n, true, 1n, "collect"),
    ];
    const kept = coalesce(history);
    expect(kept).toHaveLength(4);
    expect(kept.find((c) => c.kind === "relation" && c.relation === "like" && c.userId === 1n && c.target.id === 1n)).toMatchObject({
      version: 9n,
      member: false,
    });
    expect(kept.find((c) => c.kind === "relation" && c.relation === "collect")).toMatchObject({ version: 3n, member: true });
    expect(coalesce([...history].reverse())).toEqual(expect.arrayContaining(kept));
  });

  it("when view changes arrive, then every one is kept for the store to add by its total", () => {
    const views = [1, 2].map((n) => ({ kind: "views", target: { type: "post", id: 1n }, count: n, total: n, version: BigInt(n), at: new Date(0) }) as const);
    expect(coalesce([...views, change(1n, 5n, true)])).toHaveLength(3);
  });
});
