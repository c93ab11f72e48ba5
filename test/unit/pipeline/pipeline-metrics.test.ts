// The pipeline's metrics as the dashboard and the alerts read them: a committed batch's
// size, lags and changes by relation, and Redis's memory read at each scrape.
import { describe, expect, it } from "vitest";
import type { Change, RelationChange } from "../../../src/domain/model/index.js";
import type { MemoryReading } from "../../../src/domain/ports/index.js";
import { createPipelineMetrics } from "../../../src/pipeline/metrics.js";

const post = { type: "post", id: 1n } as const;
const secondsAgo = (s: number) => new Date(Date.now() - s * 1000);
const like = (member: boolean, ageSeconds: number): Change => ({
  kind: "relation",
  relation: "like",
  target: post,
  userId: 2n,
  authorId: 3n,
  member,
  version: 1n,
  at: secondsAgo(ageSeconds),
});
const views = (count: number): Change => ({ kind: "views", target: post, count, total: count, version: 1n, at: secondsAgo(2) });

/** The value of one series of a scrape's text. */
const valueOf = (text: string, series: string) =>
  Number(
    text
      .split("\n")
      .find((line) => line.startsWith(`${series} `))
      ?.split(" ")[1] ?? Number.NaN,
  );

describe("pipeline metrics", () => {
  it("when a batch commits, then its size, each change's lag, and what PostgreSQL applied by relation and action are recorded", async () => {
    const metrics = createPipelineMetrics();
    const [added, again, removed] = [like(true, 2), like(true, 2), like(false, 2)] as RelationChange[];

    // The second like was a redelivery PostgreSQL already held: it passed no gate and added no view.
    metrics.observePersisted([added, again, removed, views(5)] as Change[], {
      passed: [added, removed] as RelationChange[],
      deltas: [
        { target: post, name: "like", delta: 0 },
        { target: post, name: "read", delta: 5 },
      ],
    });
    const text = await metrics.registry.metrics();

    expect(valueOf(text, "likes_persist_batch_changes_count")).toBe(1);
    expect(valueOf(text, "likes_persist_batch_changes_sum")).toBe(4);
    expect(valueOf(text, "likes_persist_lag_seconds_count")).toBe(4);
    expect(valueOf(text, 'likes_persist_lag_seconds_bucket{le="1"}')).toBe(0);
    expect(valueOf(text, 'likes_persist_lag_seconds_bucket{le="2.5"}')).toBe(4);
    expect(valueOf(text, 'likes_changes_persisted_total{relation="like",action="add"}')).toBe(1);
    expect(valueOf(text, 'likes_changes_persisted_total{relation="like",action="remove"}')).toBe(1);
    expect(valueOf(text, 'likes_changes_persisted_total{relation="view",action="add"}')).toBe(5);
    expect(valueOf(text, 'likes_changes_persisted_total{relation="follow",action="add"}')).toBe(0);
  });

  it("when the broker confirms changes, then their ages are recorded as relay lag", async () => {
    const metrics = createPipelineMetrics();

    metrics.observePublished([like(true, 0), like(true, 40)]);
    const text = await metrics.registry.metrics();

    expect(valueOf(text, "likes_relay_lag_seconds_count")).toBe(2);
    expect(valueOf(text, 'likes_relay_lag_seconds_bucket{le="1"}')).toBe(1);
    expect(valueOf(text, 'likes_relay_lag_seconds_bucket{le="60"}')).toBe(2);
  });

  it("when Redis's memory is read at a scrape, then both gauges show one reading, and a reading that fails leaves the last values", async () => {
    const readings: (MemoryReading | Error)[] = [{ usedBytes: 700, maxBytes: 1000, policy: "noeviction" }, new Error("Command timed out")];
    let reads = 0;
    const metrics = createPipelineMetrics({
      redisMemory: async () => {
        const next = readings[reads++] ?? new Error("no more readings");
        if (next instanceof Error) throw next;
        return next;
      },
    });

    const first = await metrics.registry.metrics();
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const second = await metrics.registry.metrics();

    expect([valueOf(first, "likes_redis_memory_used_bytes"), valueOf(first, "likes_redis_maxmemory_bytes")]).toEqual([700, 1000]);
    expect([valueOf(second, "likes_redis_memory_used_bytes"), valueOf(second, "likes_redis_maxmemory_bytes")]).toEqual([700, 1000]);
    expect(reads).toBe(2);
  });
});
