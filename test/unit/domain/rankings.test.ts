// The hot ranking's windows and its read path, without services.
import { describe, expect, it } from "vitest";
import { bucketSpanMs, keptBuckets, windowBuckets, type HotWindow } from "../../../src/domain/model/index.js";
import { createRankingService } from "../../../src/domain/rankings.js";

const minute = 60_000;
const hour = 60 * minute;

describe("windows of time buckets", () => {
  it("when a window is summed at any moment, then its buckets cover its length and at most one bucket more, newest first", () => {
    const base = Date.UTC(2026, 10, 26, 10, 0, 0);
    for (const offset of [0, 1, 2 * minute + 30_000, 4 * minute + 59_999, 37 * minute]) {
      const now = base + offset;
      for (const [window, span, lengthMs, count] of [
        ["HOUR", "m5", hour, 13],
        ["DAY", "h1", 24 * hour, 25],
        ["WEEK", "h6", 7 * 24 * hour, 29],
      ] as const) {
        const starts = windowBuckets(window, now);
        const size = bucketSpanMs[span];
        expect(starts.length).toBe(count);
        expect(starts[0]).toBe(Math.floor(now / size) * size);
        expect(starts.every((s, i) => i === 0 || (starts[i - 1] as number) - s === size)).toBe(true);
        const oldest = starts.at(-1) as number;
        expect(oldest).toBeLessThanOrEqual(now - lengthMs);
        expect(oldest + size).toBeGreaterThan(now - lengthMs);
        expect(
          keptBuckets(now)
            .get(span)
            ?.has((starts[0] as number) + size),
        ).toBe(true);
      }
    }
  });
});

describe("hotPosts' ids", () => {
  function fakeStore(answers: (bigint[] | Error)[]) {
    const asked: { window: HotWindow; limit: number }[] = [];
    return {
      asked,
      store: {
        top: async (window: HotWindow, limit: number) => {
          asked.push({ window, limit });
          const answer = answers.shift() ?? [];
          if (answer instanceof Error) throw answer;
          return answer.slice(0, limit);
        },
      },
    };
  }

  it("when ids are kept in memory, then calls within cacheMs share one read of the best 100, and a failed read is not kept", async () => {
    let now = 1_000;
    const { asked, store } = fakeStore([new Error("Command timed out"), [5n, 4n, 3n], [9n, 8n]]);
    const rankings = createRankingService({ store, cacheMs: 250, now: () => now });
    await expect(rankings.hotPosts("DAY", 2)).rejects.toThrow("Command timed out");
    expect(await rankings.hotPosts("DAY", 2)).toEqual([5n, 4n]);
    now += 249;
    expect(await rankings.hotPosts("DAY", 3)).toEqual([5n, 4n, 3n]);
    now += 1;
    expect(await rankings.hotPosts("DAY", 1)).toEqual([9n]);
    expect(asked).toEqual([
      { window: "DAY", limit: 100 },
      { window: "DAY", limit: 100 },
      { window: "DAY", limit: 100 },
    ]);
  });

  it("when first or the window is out of range, then the caller's error, before any read", async () => {
    const { asked, store } = fakeStore([]);
    const rankings = createRankingService({ store, cacheMs: 0 });
    for (const first of [0, 101, -3, 2.5, Number.NaN])
      await expect(rankings.hotPosts("WEEK", first)).rejects.toMatchObject({ code: "BAD_USER_INPUT", field: "first" });
    await expect(rankings.hotPosts(null as unknown as HotWindow, 5)).rejects.toMatchObject({ code: "BAD_USER_INPUT", field: "window" });
    expect(asked).toEqual([]);
    expect(await rankings.hotPosts("ALL", 100)).toEqual([]);
    expect(asked).toEqual([{ window: "ALL", limit: 100 }]);
  });
});
