import { describe, expect, it } from "vitest";
import { coalesce, parseLikeChange, toMessage, type LikeChange } from "../../src/domain/like-changes.js";

const change = (userId: bigint, version: bigint, liked: boolean, targetId = 1n): LikeChange => ({
  target: { type: "post", id: targetId },
  userId,
  authorId: 3n,
  liked,
  version,
  at: new Date("2026-11-22T10:00:00.000Z"),
});

describe("like changes", () => {
  it("when changes of one pair arrive in any order, then coalescing keeps the newest version", () => {
    const history = [change(1n, 5n, true), change(1n, 9n, false), change(1n, 7n, true), change(2n, 4n, true), change(1n, 9n, false, 2n)];
    const kept = coalesce(history);
    expect(kept).toHaveLength(3);
    expect(kept.find((c) => c.userId === 1n && c.target.id === 1n)).toMatchObject({ version: 9n, liked: false });
    expect(coalesce([...history].reverse())).toEqual(expect.arrayContaining(kept));
  });

  it("when a change goes to the wire and back, then nothing is lost", () => {
    const original = change(42n, 1795343997282123n, true);
    const parsed = parseLikeChange(JSON.stringify(toMessage("7-1-0", original)));
    expect(parsed).toEqual({ change: original });
  });

  it.each([
    ["not JSON", "{", /not JSON/],
    ["an unknown target type", { ...toMessage("e", change(1n, 1n, true)), target: { type: "planet", id: "1" } }, /target\.type/],
    ["a non-decimal user", { ...toMessage("e", change(1n, 1n, true)), userId: "01" }, /userId/],
    ["a missing version", { ...toMessage("e", change(1n, 1n, true)), version: undefined }, /version/],
  ])("when a message has %s, then it is refused with a reason", (_, body, reason) => {
    const parsed = parseLikeChange(typeof body === "string" ? body : JSON.stringify(body));
    expect("invalid" in parsed && parsed.invalid).toMatch(reason);
  });
});
