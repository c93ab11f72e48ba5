// A write's deadline on Redis's clock: pure arithmetic on the two clocks.
import { describe, expect, it } from "vitest";
import { clockUncertaintyAllowanceMs, redisClockOf, type RedisClock } from "../../../../src/stores/redis/redis-clock.js";
import type { RedisClient } from "../../../../src/stores/redis/client.js";
import { writeDeadline, writeDeadlineBy } from "../../../../src/stores/redis/write-deadline.js";

/** A clock that knows Redis's to be between `lowerMs` and `upperMs` ahead. */
const knownClock = (lowerMs: number, upperMs: number): RedisClock => ({
  bounds: () => ({ lowerMs, upperMs }),
  problem: () => null,
  answering: () => true,
  deadlineFor: (answerAtMs) => answerAtMs + lowerMs,
  sample: async () => {},
  close: () => {},
});

describe("write deadlines", () => {
  it("when Redis's clock is known ahead or behind, then the deadline is the earliest Redis's clock may read at the answer, less the millisecond the script's comparison lets pass", () => {
    expect(writeDeadline(1_000, knownClock(1_995, 2_005), 50_000).atMs).toBe(52_994);
    expect(writeDeadlineBy(51_000, knownClock(-2_005.5, -1_995)).atMs).toBe(48_993);
  });

  it("when a write's failure may be answered, then not before its answer time", async () => {
    const answerAt = Date.now() + 30;
    await writeDeadlineBy(answerAt, knownClock(0, 0)).settled();
    expect(Date.now()).toBeGreaterThanOrEqual(answerAt);
  });

  it("when nobody watches a client's clock, then Redis's is assumed within the allowance, and a short wait keeps half for the write", () => {
    const unwatched = redisClockOf({} as RedisClient);
    const now = Date.now();
    expect(unwatched.deadlineFor(now + 10_000)).toBe(now + 10_000 - clockUncertaintyAllowanceMs);
    const short = unwatched.deadlineFor(now + 100);
    expect(short).toBeGreaterThanOrEqual(now + 50);
    expect(short).toBeLessThanOrEqual(now + 51);
  });
});
