import type { Target, TargetType } from "../../domain/targets.js";
import type { Database } from "./database.js";

export interface PersistedCounterStore {
  /** Counter values in PostgreSQL for each target, in the order given; absent counters are left out. */
  read(targets: readonly Target[]): Promise<Record<string, number>[]>;
}

export function createPersistedCounterStore(db: Database): PersistedCounterStore {
  return {
    async read(targets) {
      const byType = new Map<TargetType, bigint[]>();
      for (const t of targets) byType.set(t.type, [...(byType.get(t.type) ?? []), t.id]);
      const rows = (
        await Promise.all(
          [...byType].map(([targetType, ids]) =>
            db.counter.findMany({ where: { targetType, targetId: { in: ids } } }),
          ),
        )
      ).flat();
      const values = new Map<string, Record<string, number>>();
      for (const row of rows) {
        const key = `${row.targetType}:${row.targetId}`;
        const counts = values.get(key) ?? {};
        counts[row.name] = Number(row.value);
        values.set(key, counts);
      }
      return targets.map((t) => values.get(`${t.type}:${t.id}`) ?? {});
    },
  };
}
