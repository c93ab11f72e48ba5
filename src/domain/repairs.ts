// Applying reconcile repairs, each to the store it is about.
import type { Repair } from "./model/index.js";
import type { CounterStore, DatabaseReconcileStore, RedisReconcileStore } from "./ports/index.js";

export interface RepairService {
  /** Applies a repair; safe to repeat, and a no-op for pairs changed since the comparison. */
  apply(repair: Repair): Promise<void>;
}

export function createRepairService(stores: {
  database: DatabaseReconcileStore;
  redis: RedisReconcileStore;
  counters: Pick<CounterStore, "mirror">;
}): RepairService {
  return {
    async apply(repair) {
      switch (repair.kind) {
        case "recountRedis":
          await stores.redis.recount(repair, repair.observedVersion);
          return;
        case "mirrorDerived":
          await stores.counters.mirror(await stores.database.derived(repair.target, repair.names));
          return;
        default: {
          // Derived counters a database repair set (a recount, or the credits of members it moved) go to Redis as committed.
          const set = await stores.database.repair(repair);
          if (set.length > 0) await stores.counters.mirror(set);
        }
      }
    },
  };
}
