import { describe, expect, it } from "vitest";
import { Batcher, BatcherClosedError } from "../../../src/pipeline/batcher.js";

describe("batcher", () => {
  it("when items exceed the batch size, then batches are cut at the size and run one at a time", async () => {
    const seen: number[][] = [];
    let running = 0;
    let overlapped = false;
    const batcher = new Batcher<number, number>({
      maxItems: 4,
      lingerMs: 1_000,
      flush: async (items) => {
        overlapped ||= running > 0;
        running++;
        seen.push([...items]);
        await new Promise((r) => setTimeout(r, 5));
        running--;
        return items.map((i) => i * 10);
      },
    });
    const outcomes = await Promise.all(Array.from({ length: 10 }, (_, i) => batcher.add(i)));
    await batcher.close();
    expect(outcomes).toEqual(Array.from({ length: 10 }, (_, i) => i * 10));
    expect(seen.map((b) => b.length)).toEqual([4, 4, 2]);
    expect(overlapped).toBe(false);
  });

  it("when fewer items than a batch arrive, then they are flushed after the linger time", async () => {
    const started = Date.now();
    const batcher = new Batcher<string, string>({ maxItems: 100, lingerMs: 50, flush: async (items) => items.map((i) => i.toUpperCase()) });
    expect(await batcher.add("a")).toBe("A");
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
  });

  it("when a flush fails, then every item of that batch fails and the next batch still runs", async () => {
    let calls = 0;
    const batcher = new Batcher<number, number>({
      maxItems: 2,
      lingerMs: 1,
      flush: async (items) => {
        if (calls++ === 0) throw new Error("database away");
        return [...items];
      },
    });
    const first = await Promise.allSettled([batcher.add(1), batcher.add(2)]);
    expect(first.map((r) => r.status)).toEqual(["rejected", "rejected"]);
    expect(await batcher.add(3)).toBe(3);
  });

  it("when closed, then the buffered batch is flushed and new items are refused", async () => {
    const batcher = new Batcher<number, number>({ maxItems: 100, lingerMs: 60_000, flush: async (items) => [...items] });
    const pending = batcher.add(7);
    await batcher.close();
    expect(await pending).toBe(7);
    await expect(batcher.add(8)).rejects.toBeInstanceOf(BatcherClosedError);
  });
});
