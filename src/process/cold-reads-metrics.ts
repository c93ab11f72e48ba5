// Prometheus metrics of reads Redis cannot serve: whether this process reaches Redis
// (while it does not, reads answer from PostgreSQL and likes are refused), how the
// warmer fills back in what reads answered from PostgreSQL, and what loads found of
// targets held from another replication history (a failover, a restart).
import { Gauge, type Registry } from "prom-client";
import type { Reachability } from "../domain/ports/index.js";
import type { LoadHistories } from "../compose/counts.js";
import type { Warmer } from "../domain/warmer.js";
import { totalCounter } from "./metric-totals.js";

export function watchColdReads(registry: Registry, reachability: Reachability, warmer: Warmer, loads: { histories(): LoadHistories }): void {
  new Gauge({
    name: "likes_redis_reachable",
    help: "1 while this process reaches Redis; 0 while it does not, reads answering from PostgreSQL and likes refused",
    registers: [registry],
    collect() {
      this.set(reachability.reachable() ? 1 : 0);
    },
  });
  new Gauge({
    name: "likes_warmer_waiting",
    help: "Targets reads answered from PostgreSQL, waiting to be loaded into Redis",
    registers: [registry],
    collect() {
      this.set(warmer.stats().waiting);
    },
  });
  totalCounter(registry, "likes_warmer_loaded_total", "Targets the warmer loaded into Redis", () => warmer.stats().loaded);
  totalCounter(
    registry,
    "likes_warmer_dropped_total",
    "Targets handed to the warmer while its queue was full, left to their next read",
    () => warmer.stats().dropped,
  );
  totalCounter(
    registry,
    "likes_warmer_failed_batches_total",
    "Warmer batches that failed or were refused (Redis near its maxmemory)",
    () => warmer.stats().failedBatches,
  );
  totalCounter(
    registry,
    "likes_redis_targets_adopted_total",
    "Targets Redis held from another replication history (a failover, a restart, a slot's move) and lacking nothing PostgreSQL holds: kept as they were",
    () => loads.histories().adopted,
  );
  totalCounter(
    registry,
    "likes_redis_targets_lost_changes_total",
    "Targets Redis held from another replication history lacking changes PostgreSQL holds (a failover or a restart took them back): loaded again from PostgreSQL",
    () => loads.histories().reloaded,
  );
  totalCounter(
    registry,
    "likes_redis_lost_acknowledged_changes_total",
    "Changes this process acknowledged that neither Redis nor PostgreSQL held after a failover and that it could not append to PostgreSQL (each logged with its pair)",
    () => loads.histories().lostAcknowledged,
  );
  totalCounter(
    registry,
    "likes_redis_appended_acknowledged_changes_total",
    "Changes this process acknowledged that PostgreSQL lacked as a Redis connection closed or a failover settled, appended to PostgreSQL by the process itself",
    () => loads.histories().appendedAcknowledged,
  );
}
