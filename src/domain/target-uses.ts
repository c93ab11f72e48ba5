// Which targets this process used (read, from Redis or from the counts it keeps in
// memory, or changed), told to Redis's use records (ports/memory.ts) every
// `flushEveryMs`, so that eviction goes by real use. A hot post read a thousand
// times a second from this process's memory costs Redis one record a flush, and
// still looks hot to it.
import type { Target, TargetType } from "./model/index.js";
import type { UseRecords } from "./ports/index.js";

export interface TargetUses {
  /** Notes these targets as used now; costs no store call. */
  used(targets: readonly Target[]): void;
  /** Tells the records what was used since the last flush. */
  flush(): Promise<void>;
  /** Stops the flushes, after a last one. */
  close(): Promise<void>;
}

export interface TargetUsesOptions {
  readonly records: UseRecords;
  /** How often uses are told to the records; default 30 s (idle times run in days). */
  readonly flushEveryMs?: number;
  /** Targets noted at most between flushes; one more flushes at once. Default 100,000. */
  readonly maxTargets?: number;
  readonly onFailure?: (error: unknown) => void;
}

/** Targets told to the records in one call at most. */
const flushSlice = 10_000;
/** Ids up to this are exact as numbers. */
const largestNumberId = BigInt(Number.MAX_SAFE_INTEGER);

export function createTargetUses(options: TargetUsesOptions): TargetUses {
  const { records, onFailure } = options;
  const maxTargets = options.maxTargets ?? 100_000;
  // By type and id, as a number where exact: a feed notes 100 targets a request, and
  // string keys, then bigint ones (about 1% of a feed's API CPU), showed in profiles.
  let noted = new Map<TargetType, Set<number | bigint>>();
  let count = 0;
  let flushing: Promise<void> | null = null;

  async function flush(): Promise<void> {
    if (count === 0) return;
    const taken = noted;
    [noted, count] = [new Map<TargetType, Set<number | bigint>>(), 0];
    const targets: Target[] = [];
    for (const [type, ids] of taken) for (const id of ids) targets.push({ type, id: BigInt(id) });
    try {
      for (let i = 0; i < targets.length; i += flushSlice) await records.touch(targets.slice(i, i + flushSlice));
    } catch (error) {
      // Dropped: the next use of each target records it; until then it only looks a little colder.
      onFailure?.(error);
    }
  }

  const flushOnce = () => {
    flushing ??= flush().finally(() => (flushing = null));
    return flushing;
  };
  const timer = setInterval(() => void flushOnce(), options.flushEveryMs ?? 30_000);
  timer.unref();

  return {
    used(targets) {
      for (const target of targets) {
        let ids = noted.get(target.type);
        if (!ids) noted.set(target.type, (ids = new Set()));
        const before = ids.size;
        ids.add(target.id <= largestNumberId ? Number(target.id) : target.id);
        count += ids.size - before;
      }
      if (count >= maxTargets) void flushOnce();
    },
    flush: flushOnce,
    async close() {
      clearInterval(timer);
      await flushOnce();
    },
  };
}
