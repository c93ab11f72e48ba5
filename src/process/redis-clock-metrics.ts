// Prometheus metrics of Redis's clock as a process measures it: write deadlines are
// set on it (stores/redis/redis-clock.ts), so an offset is tolerated, but an
// uncertainty above the allowance refuses writes.
import { Gauge, type Registry } from "prom-client";
import type { RedisClock } from "../stores/redis/redis-clock.js";

export function watchRedisClockMetrics(registry: Registry, clock: RedisClock): void {
  new Gauge({
    name: "likes_redis_clock_offset_seconds",
    help: "How far Redis's clock runs ahead of this process's (negative: behind), as measured with TIME; write deadlines are set on Redis's clock",
    registers: [registry],
    // Under npm start the processes share a host and a clock: their mean, not their sum.
    aggregator: "average",
    collect() {
      const bounds = clock.bounds();
      this.set(bounds ? (bounds.lowerMs + bounds.upperMs) / 2000 : Number.NaN);
    },
  });
  new Gauge({
    name: "likes_redis_clock_uncertainty_seconds",
    help: "How far off the offset may be (half the round trip of the best recent TIME, widened by drift); above 0.1 writes are refused; NaN while Redis does not answer",
    registers: [registry],
    aggregator: "max",
    collect() {
      // While Redis does not answer, the clock is not what is wrong (likes_redis_reachable says so).
      const bounds = clock.answering() ? clock.bounds() : undefined;
      this.set(bounds === undefined ? Number.NaN : bounds ? (bounds.upperMs - bounds.lowerMs) / 2000 : Number.POSITIVE_INFINITY);
    },
  });
}
