// Applying reconcile repairs, each to the store it is about.
import type { Repair } from "./model.js";
import type { DatabaseReconcileStore, RedisReconcileStore } from "./ports.js";

export interface RepairService {
  /** Applies a repair; safe to repeat, and a no-op for pairs changed since the comparison. */
  apply(repair: Repair): Promise<void>;
}

export function createRepairService(stores: { database: DatabaseReconcileStore; redis: RedisReconcileStore }): RepairService {
  return {
    async apply(repair) {
      if (repair.kind === "recountRedis") await stores.redis.recount(repair.target, repair.observedVersion);
      else await stores.database.repair(repair);
    },
  };
}
