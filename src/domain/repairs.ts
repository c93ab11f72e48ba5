// Applying reconcile repairs, each to the store it is about.
import type { ReconcileDatabaseStore } from "../stores/postgres/reconcile-store.js";
import type { ReconcileCacheStore } from "../stores/redis/reconcile-store.js";
import type { Compensation } from "./reconcile.js";

export interface RepairService {
  /** Applies a repair; safe to repeat, and a no-op for pairs changed since the comparison. */
  apply(compensation: Compensation): Promise<void>;
}

export function createRepairService(stores: { database: ReconcileDatabaseStore; cache: ReconcileCacheStore }): RepairService {
  return {
    async apply(compensation) {
      if (compensation.kind === "recountCache") await stores.cache.recount(compensation.target, compensation.observedVersion);
      else await stores.database.repair(compensation);
    },
  };
}
