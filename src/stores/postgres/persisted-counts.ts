// Counts of targets as PostgreSQL's `counters` table holds them, for anonymous
// reads of targets Redis does not hold (counters.ts): one statement for a whole
// feed, no transaction, nothing loaded into Redis.
import { counterNames, targetKey, type CounterName, type Counts } from "../../domain/model/index.js";
import type { PersistedCounts } from "../../domain/ports/index.js";
import { selectCounters, type CounterRow } from "./counter-sql.js";
import type { Database } from "./database.js";

export function createPersistedCounts(db: Database): PersistedCounts {
  return {
    async read(targets) {
      if (targets.length === 0) return [];
      const wanted = targets.flatMap((target) => counterNames[target.type].map((name: CounterName) => ({ target, name })));
      const rows = await db.$queryRaw<CounterRow[]>(selectCounters(wanted));
      const byTarget = new Map<string, Record<string, number>>();
      for (const row of rows) {
        const key = `${row.target_type}:${row.target_id}`;
        let counts = byTarget.get(key);
        if (!counts) byTarget.set(key, (counts = {}));
        counts[row.name] = Number(row.value);
      }
      return targets.map((target): Counts => byTarget.get(targetKey(target)) ?? {});
    },
  };
}
