import { describe, expect, it } from "vitest";
import { backoffMs } from "../../../src/domain/backoff.js";

describe("backoffMs", () => {
  it("when failures repeat, then the wait doubles from the first up to the most", () => {
    expect([0, 1, 2, 3, 6, 60].map((failures) => backoffMs(failures, { firstMs: 100, maxMs: 5_000 }))).toEqual([100, 200, 400, 800, 5_000, 5_000]);
  });

  it("when jitter is asked for, then each wait is a whole number between the ceiling less that share and the ceiling", () => {
    const waits = Array.from({ length: 200 }, () => backoffMs(3, { firstMs: 100, maxMs: 5_000, jitter: 0.25 }));
    expect(waits.every((wait) => Number.isInteger(wait) && wait >= 600 && wait <= 800)).toBe(true);
    expect(new Set(waits).size).toBeGreaterThan(1);
  });
});
