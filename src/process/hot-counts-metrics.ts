// Prometheus metrics of the counts an API process keeps in memory: how often a
// target was answered from them, how often Redis told of a write that dropped
// one, how many are held, and how stale at most what they answered was.
import { Gauge, Histogram, type Registry } from "prom-client";
import { totalCounter } from "./metric-totals.js";
import type { HotCounts } from "../stores/redis/hot-counts.js";

/** Seconds: the confirmation's age at rest is the listeners' ping interval (20 ms); the bound is 100 ms. */
const ageBuckets = [0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1];

export function watchHotCounts(registry: Registry, hotCounts: HotCounts): void {
  totalCounter(registry, "likes_hot_counts_hits_total", "Targets whose counts were answered from this process's memory", () => hotCounts.stats().hits);
  totalCounter(registry, "likes_hot_counts_misses_total", "Targets whose counts were read from Redis", () => hotCounts.stats().misses);
  totalCounter(
    registry,
    "likes_hot_counts_invalidations_total",
    "Counts held in memory dropped because Redis told of a write",
    () => hotCounts.stats().invalidations,
  );
  new Gauge({
    name: "likes_hot_counts_entries",
    help: "Counter hashes held in this process's memory",
    registers: [registry],
    collect() {
      this.set(hotCounts.stats().entries);
    },
  });
  const age = new Histogram({
    name: "likes_hot_counts_staleness_bound_seconds",
    help: "At each read answered from memory, how long before it the newest confirmation that every write was heard had been asked: how stale, at most, what it answered was",
    buckets: ageBuckets,
    registers: [registry],
  });
  hotCounts.onServed((ageMs) => age.observe(ageMs / 1000));
}
