// Where a budget stands for the RateLimit-* headers, from its GCRA state.
import { describe, expect, it } from "vitest";
import { standingOf, tighter } from "../../../src/domain/rate-limits.js";

describe("a budget's standing", () => {
  it("when a budget is spent some way ahead of now, then the units left are what has not refilled, rounded down, and reset is the whole seconds until full", () => {
    expect(standingOf(600, 0, 60_000)).toEqual({ limit: 600, remaining: 600, resetSeconds: 0 });
    expect(standingOf(600, 100, 60_000)).toEqual({ limit: 600, remaining: 599, resetSeconds: 1 });
    expect(standingOf(600, 30_000, 60_000)).toEqual({ limit: 600, remaining: 300, resetSeconds: 30 });
    expect(standingOf(4, 59_999, 60_000)).toEqual({ limit: 4, remaining: 0, resetSeconds: 60 });
    // In the whole microseconds a charge is decided with: 7 units refill every 8,571,429 µs, so after 6 units one is left.
    expect(standingOf(7, (6 * 8_571_429) / 1000, 60_000)).toEqual({ limit: 7, remaining: 1, resetSeconds: 52 });
    expect(standingOf(500_000, (1234 * 120) / 1000, 60_000)).toEqual({ limit: 500_000, remaining: 498_766, resetSeconds: 1 });
    // A unit refilled only in part is not left.
    expect(standingOf(500_000, (1234 * 120 - 1) / 1000, 60_000)).toEqual({ limit: 500_000, remaining: 498_766, resetSeconds: 1 });
    // Reports of other processes may put a budget more than a period ahead: nothing is left, never less.
    expect(standingOf(4, 90_000, 60_000)).toEqual({ limit: 4, remaining: 0, resetSeconds: 90 });
  });

  it("when two budgets were charged, then the one with fewer units left is told, the first on a tie, and none beats nothing", () => {
    const user = { limit: 600, remaining: 10, resetSeconds: 59 };
    const address = { limit: 3000, remaining: 2000, resetSeconds: 20 };
    expect(tighter(user, address)).toBe(user);
    expect(tighter(address, user)).toBe(user);
    expect(tighter(null, address)).toBe(address);
    expect(tighter(address, null)).toBe(address);
    expect(tighter(null, null)).toBeNull();
    const same = { ...user };
    expect(tighter(user, same)).toBe(user);
  });
});
