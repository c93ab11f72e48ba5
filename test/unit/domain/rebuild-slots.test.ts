// The process's rebuild slots, without services: a cap, a bounded queue, and waits no longer than the caller's deadline.
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { DomainError, ErrorCode } from "../../../src/errors.js";
import { createRebuildSlots } from "../../../src/domain/rebuild-slots.js";

const codeOf = (error: unknown) => (error instanceof DomainError ? error.code : String(error));

describe("rebuild slots", () => {
  it("when more loads are asked than run at once, then the rest wait their turn in order and all run", async () => {
    const slots = createRebuildSlots({ atOnce: 2, maxWaiting: 10 });
    let running = 0;
    let most = 0;
    const order: number[] = [];
    const load = (i: number) => async () => {
      most = Math.max(most, ++running);
      await sleep(10);
      order.push(i);
      running--;
      return i;
    };
    const done = await Promise.all(Array.from({ length: 6 }, (_, i) => slots.run(load(i), Date.now() + 5_000)));
    expect(done).toEqual([0, 1, 2, 3, 4, 5]);
    expect(most).toBe(2);
    expect(order.slice(2)).toEqual([2, 3, 4, 5]);
    expect([slots.running, slots.waiting]).toEqual([0, 0]);
  });

  it("when the queue is full, or the deadline comes before a slot, then SERVICE_UNAVAILABLE and the load never runs", async () => {
    const slots = createRebuildSlots({ atOnce: 1, maxWaiting: 1 });
    let ran = 0;
    let release = () => {};
    const first = slots.run(() => new Promise<void>((resolve) => (release = resolve)), Date.now() + 5_000);
    const waiting = slots.run(async () => void ran++, Date.now() + 50);
    const refused = slots.run(async () => void ran++, Date.now() + 5_000);
    await expect(refused.catch(codeOf)).resolves.toBe(ErrorCode.SERVICE_UNAVAILABLE);
    await expect(waiting.catch(codeOf)).resolves.toBe(ErrorCode.SERVICE_UNAVAILABLE);
    await expect(slots.run(async () => void ran++, Date.now() - 1).catch(codeOf)).resolves.toBe(ErrorCode.SERVICE_UNAVAILABLE);
    expect(slots.waiting).toBe(0);
    release();
    await first;
    expect(ran).toBe(0);
    // A load that fails gives its slot back.
    await expect(slots.run(() => Promise.reject(new Error("boom")), Date.now() + 1_000)).rejects.toThrow("boom");
    await expect(slots.run(async () => "after", Date.now() + 1_000)).resolves.toBe("after");
  });
});
