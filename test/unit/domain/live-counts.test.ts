// The order of what a live-counts subscription is sent: its first counts come from a read
// that may end after a later read of a change (a cold post rebuilt meanwhile), and the
// later read's counts must not be overtaken. Pure: the reads are functions this test holds.
import { describe, expect, it } from "vitest";
import { createLiveCounts } from "../../../src/domain/live-counts.js";
import type { Counts, Target } from "../../../src/domain/model/index.js";

describe("live counts", () => {
  it("when a subscription's first read ends after a change's read, then the newer counts stay the last sent", async () => {
    let heard: (target: Target | null) => void = () => undefined;
    const changes = {
      listen: async () => undefined,
      ignore: async () => undefined,
      onChange: (handler: (target: Target | null) => void) => void (heard = handler),
    };
    let likes = 10;
    let holdFirst: (() => void) | null = null;
    let reads = 0;
    const read = async (targets: readonly Target[]): Promise<Counts[]> => {
      const seen = likes;
      reads++;
      // The first read (the subscription's) is held until the change's read has been sent.
      if (reads === 1) await new Promise<void>((resolve) => (holdFirst = resolve));
      return targets.map(() => ({ like: seen }));
    };
    const live = createLiveCounts({ changes, read, maxPosts: 10, intervalMs: 0 });
    const watching = live.watch([1n]);
    await new Promise((resolve) => setImmediate(resolve));
    likes = 11;
    heard({ type: "post", id: 1n });
    await new Promise((resolve) => setTimeout(resolve, 10));
    (holdFirst as (() => void) | null)?.();
    const stream = await watching;
    const first = await stream.next();
    expect(first.value).toEqual({ postId: 1n, counts: { like: 11 } });
    // Nothing older follows.
    const next = await Promise.race([stream.next(), new Promise((resolve) => setTimeout(() => resolve("none"), 50))]);
    expect(next).toBe("none");
    live.close();
  });
});
