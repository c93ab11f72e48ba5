// The loads of targets that writes wait for: a write needs the target it changes in
// Redis, so it waits for its load (target-loads.ts), or for another process's load of
// the same target, in one of the process's rebuild slots (rebuild-slots.ts).
import { setTimeout as sleep } from "node:timers/promises";
import { DomainError, ErrorCode } from "../errors.js";
import { targetKey, type Target, type TargetKey } from "./model/index.js";
import type { CounterStore } from "./ports/index.js";
import type { RebuildSlots } from "./rebuild-slots.js";
import type { LoadAdmission, TargetLoader } from "./target-loads.js";

/** Loads a write tries before it gives up on a target that keeps leaving Redis. */
export const rebuildRounds = 3;

/** Another process's load of the target did not finish in time: nothing is wrong, only slow (SERVICE_UNAVAILABLE). */
export class RebuildTimeoutError extends DomainError {
  constructor(target: Target, waitedMs: number) {
    super(ErrorCode.SERVICE_UNAVAILABLE, `${target.type} ${target.id} was still being loaded from PostgreSQL after ${waitedMs} ms; retry shortly.`);
  }
}

/** What every rebuild of the process takes, and the loads it has in flight. */
export interface TargetRebuilds {
  readonly counterStore: Pick<CounterStore, "read">;
  readonly loader: Pick<TargetLoader, "load">;
  readonly slots: RebuildSlots;
  readonly admitLoad?: LoadAdmission;
  /** How long a write waits for another process's load of the same target. */
  readonly waitMs: number;
  /** The load in flight of each target: concurrent writes in this process share one. */
  readonly inFlight: Map<TargetKey, Promise<boolean>>;
}

async function rebuildOnce({ loader, counterStore, waitMs }: TargetRebuilds, target: Target, deadlineAtMs: number): Promise<boolean> {
  const started = Date.now();
  for (let round = 0; ;) {
    const [outcome] = await loader.load([target]);
    switch (outcome) {
      case "loaded":
      case "held":
        return true;
      case "missing":
        return false;
      case "dropped":
        // Dropped again right after its load (a late change, a reconcile repair): loaded once more.
        if (++round < rebuildRounds) continue;
        throw new DomainError(ErrorCode.SERVICE_UNAVAILABLE, `The counters of ${target.type} ${target.id} are being repaired; retry shortly.`);
      default:
        // Another process is loading it (or a load ran out of its lease): wait for its counter hash.
        if (Date.now() - started > waitMs || Date.now() >= deadlineAtMs) throw new RebuildTimeoutError(target, Date.now() - started);
        await sleep(20);
        if ((await counterStore.read([target]))[0] !== null) return true;
    }
  }
}

/** CounterService.rebuild: the target put back into Redis, false when it does not exist. */
export function rebuild(rebuilds: TargetRebuilds, target: Target, deadlineAtMs = Date.now() + rebuilds.waitMs): Promise<boolean> {
  const { inFlight, admitLoad, slots } = rebuilds;
  const key = targetKey(target);
  // Concurrent writes in this process share one load, and the first one's deadline.
  let pending = inFlight.get(key);
  if (!pending) {
    const admitted = admitLoad ? admitLoad() : Promise.resolve();
    pending = admitted.then(() => slots.run(() => rebuildOnce(rebuilds, target, deadlineAtMs), deadlineAtMs)).finally(() => inFlight.delete(key));
    inFlight.set(key, pending);
  }
  return pending;
}
