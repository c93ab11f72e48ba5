// Derived counters PostgreSQL committed that Redis could not take (out of reach):
// kept in this process, the newest value of each counter, and mirrored once Redis
// answers. A sequence number travels with each value, so an older one never wins.
import { targetKey, type CounterValue } from "./model/index.js";
import type { Reachability } from "./ports/index.js";

export interface Unmirrored {
  /** Keeps values to mirror later; returns at once. */
  keep(values: readonly CounterValue[]): void;
}

export interface UnmirroredOptions {
  readonly mirror: (values: readonly CounterValue[]) => Promise<void>;
  readonly reachability?: Reachability;
  /** Tells of a failed mirror (it marks Redis out of reach when it says so). */
  readonly outOfReach: (error: unknown) => boolean;
  /** Values kept at most; past it, the reconcile pass repairs the counters. Default 100,000. */
  readonly max?: number;
  /** How often the kept values are tried again; default 1 s. */
  readonly everyMs?: number;
}

export function createUnmirrored(options: UnmirroredOptions): Unmirrored {
  const { mirror, reachability, outOfReach } = options;
  const max = options.max ?? 100_000;
  const kept = new Map<string, CounterValue>();
  let timer: NodeJS.Timeout | null = null;
  // One mirror at a time: a slow Redis would otherwise get the whole set again every tick.
  let mirroring = false;
  const keyOf = (value: CounterValue) => `${targetKey(value.target)}:${value.name}`;

  const tryAgain = () => {
    if (mirroring || (reachability && !reachability.reachable())) return;
    mirroring = true;
    const values = [...kept.values()];
    mirror(values)
      .then(
        () => {
          for (const value of values) if (kept.get(keyOf(value)) === value) kept.delete(keyOf(value));
          if (kept.size === 0 && timer) {
            clearInterval(timer);
            timer = null;
          }
        },
        (error: unknown) => void outOfReach(error),
      )
      .finally(() => (mirroring = false));
  };

  return {
    keep(values) {
      for (const value of values) {
        const held = kept.get(keyOf(value));
        if (held ? held.seq >= value.seq : kept.size >= max) continue;
        kept.set(keyOf(value), value);
      }
      timer ??= setInterval(tryAgain, options.everyMs ?? 1_000);
      timer.unref();
    },
  };
}
