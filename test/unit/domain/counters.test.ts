// Sharing of anonymous count reads, without services: only reads asked in the same tick share.
import { setImmediate as nextTurn } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { createCounterService } from "../../../src/domain/counters.js";
import type { Target, TargetReadout } from "../../../src/domain/model/index.js";
import type { ColdReadouts } from "../../../src/domain/cold-readouts.js";
import type { CounterStore, RebuildStore, ReadoutRequest } from "../../../src/domain/ports/index.js";
import type { TargetLoader } from "../../../src/domain/target-loads.js";

describe("anonymous count reads", () => {
  it("when the same posts' counts are asked in one tick, then one store read answers all; asked later, or by a viewer, each reads its own", async () => {
    const reads: { targets: number; viewerId: bigint | null }[] = [];
    let like = 1;
    const counterStore = {
      readout: async (targets: readonly Target[], request: ReadoutRequest): Promise<TargetReadout[]> => {
        reads.push({ targets: targets.length, viewerId: request.viewerId });
        const counts = { like: like++ };
        await nextTurn();
        return targets.map(() => ({ counts, viewerIn: {} }));
      },
    } as unknown as CounterStore;
    const counters = createCounterService({ counterStore, rebuildStore: {} as RebuildStore, loader: {} as TargetLoader, cold: {} as ColdReadouts });
    const posts: Target[] = [1n, 2n, 3n].map((id) => ({ type: "post", id }));

    const together = [counters.readout(posts, null), counters.readout(posts, null), counters.readout(posts, 7n)];
    // Asked in a later tick while the first read is still in flight: it may have been sent before this caller asked.
    await Promise.resolve();
    await new Promise((resolve) => process.nextTick(resolve));
    const later = counters.readout(posts, null);
    const [a, b, viewer] = await Promise.all(together);
    expect(a?.map((v) => v.counts.like)).toEqual([1, 1, 1]);
    expect(b?.map((v) => v.counts.like)).toEqual([1, 1, 1]);
    expect(viewer?.map((v) => v.counts.like)).toEqual([2, 2, 2]);
    expect((await later).map((v) => v.counts.like)).toEqual([3, 3, 3]);
    expect(reads).toEqual([
      { targets: 3, viewerId: null },
      { targets: 3, viewerId: 7n },
      { targets: 3, viewerId: null },
    ]);
  });
});
