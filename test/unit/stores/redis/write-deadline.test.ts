// A write's deadline and the clock skew it allows for: pure arithmetic on the two clocks.
import { describe, expect, it } from "vitest";
import { clockSkewAllowanceMs, clockSkewMs, writeDeadline } from "../../../../src/stores/redis/write-deadline.js";

describe("write deadlines", () => {
  it("when a write is sent, then Redis must run it by the skew allowance before its failure may be answered", () => {
    expect(writeDeadline(1_000, 50_000).atMs).toBe(51_000 - clockSkewAllowanceMs);
    // A timeout too short for the allowance keeps half of it for the write.
    expect(writeDeadline(100, 50_000).atMs).toBe(50_050);
  });

  it("when TIME comes back, then the skew is Redis's clock against the middle of the round trip", () => {
    expect(clockSkewMs(1_000, ["1", "500000"], 1_000)).toBe(500);
    expect(clockSkewMs(1_000, ["0", "900000"], 1_200)).toBe(-200);
  });
});
