// What the service does as Redis fills up. Redis runs with `noeviction`: it holds
// the outbox, receipts, rebuild records and membership shards, and an eviction of
// its own choosing would drop changes not yet persisted or half a target. So the
// service keeps Redis under its `maxmemory` itself, from a reading of INFO memory
// taken at most once per `sampleEveryMs` per process, on the path that loads targets:
//
// - from `evictFrom` of maxmemory, it takes the least recently used posts and
//   comments out of Redis as idle eviction does (rebuildStore.evict: only targets
//   whose every change PostgreSQL applied, whole), and the least recently used
//   users' member indexes (a user's next read loads theirs back from PostgreSQL,
//   with the likes not yet persisted from the user's pending record), until Redis
//   is under `evictTo`;
// - from `refuseFrom`, it loads no target Redis does not hold: a rebuild answers
//   OVER_CAPACITY. Anonymous counts are still read from PostgreSQL, and targets Redis
//   holds are read and changed as usual: the memory left above `refuseFrom` is for
//   their changes (a like adds a member, the outbox an entry).
//
// Without a maxmemory (0) nothing is refused or evicted.
import { DomainError, ErrorCode } from "../errors.js";
import type { Target } from "./model/index.js";
import type { MemoryReading, MemoryStore, RebuildStore, SnapshotStore } from "./ports/index.js";
import type { LoadAdmission } from "./target-loads.js";

export interface MemoryPolicyOptions {
  readonly store: MemoryStore;
  readonly rebuilds: Pick<RebuildStore, "evict">;
  readonly snapshots: Pick<SnapshotStore, "newestVersion">;
  /** How old a reading may be before the next load takes a new one, in ms; default 1,000. */
  readonly sampleEveryMs?: number;
  /** Fractions of maxmemory: eviction starts at `evictFrom` (0.8) and stops under `evictTo` (0.7); loads are refused from `refuseFrom` (0.9). */
  readonly evictFrom?: number;
  readonly evictTo?: number;
  readonly refuseFrom?: number;
  /** Counter hashes looked at per eviction round, and the coldest of them evicted; defaults 1,000 and 100. */
  readonly sampleSize?: number;
  readonly evictPerRound?: number;
  /** Member indexes unused this long at least may be reclaimed, in seconds; default 60. */
  readonly indexIdleSeconds?: number;
  /** Told after each eviction round (targets evicted, member indexes reclaimed), and when a reading or a round failed. */
  readonly onEvicted?: (evicted: number, reading: MemoryReading, indexesReclaimed: number) => void;
  readonly onFailure?: (error: unknown) => void;
}

export interface MemoryPolicy {
  /** Throws OVER_CAPACITY when Redis is too full to take another target; starts eviction when it should. */
  readonly admit: LoadAdmission;
  /** The last reading, or null before the first. */
  reading(): MemoryReading | null;
  /** Resolves when the eviction under way, if any, is over. */
  settled(): Promise<void>;
}

const overCapacity = (r: MemoryReading) =>
  new DomainError(
    ErrorCode.OVER_CAPACITY,
    `Redis is near its memory limit (${Math.round(r.usedBytes / 2 ** 20)} of ${Math.round(r.maxBytes / 2 ** 20)} MiB), so targets it does not hold are not loaded until cold ones are evicted; retry later.`,
  );

const evictionsAtOnce = 4;

/** Eviction rounds at most per burst, so a Redis full of targets that cannot leave (not persisted) is not scanned forever. */
const maxRounds = 50;

export function createMemoryPolicy(options: MemoryPolicyOptions): MemoryPolicy {
  const { store, rebuilds, snapshots } = options;
  const sampleEveryMs = options.sampleEveryMs ?? 1_000;
  const evictFrom = options.evictFrom ?? 0.8;
  const evictTo = options.evictTo ?? 0.7;
  const refuseFrom = options.refuseFrom ?? 0.9;
  const sampleSize = options.sampleSize ?? 1_000;
  const evictPerRound = options.evictPerRound ?? 100;
  const indexIdleSeconds = options.indexIdleSeconds ?? 60;
  let last: MemoryReading | null = null;
  let takenAt = Number.NEGATIVE_INFINITY;
  let measuring: Promise<MemoryReading> | null = null;
  let evicting: Promise<void> | null = null;

  const over = (r: MemoryReading, fraction: number) => r.maxBytes > 0 && r.usedBytes >= r.maxBytes * fraction;

  async function evictRounds(): Promise<void> {
    for (let round = 0; round < maxRounds; round++) {
      let evicted = 0;
      const kept: Target[] = [];
      const coldest = await store.coldest(sampleSize, evictPerRound);
      // A few at a time: each asks PostgreSQL for the target's applied version, on connections reads need too.
      for (let i = 0; i < coldest.length; i += evictionsAtOnce) {
        const slice = coldest.slice(i, i + evictionsAtOnce);
        const outcomes = await Promise.all(slice.map(async (target) => rebuilds.evict(target, await snapshots.newestVersion(target))));
        evicted += outcomes.filter((o) => o === "evicted").length;
        kept.push(...slice.filter((_, j) => outcomes[j] === "kept"));
      }
      if (kept.length > 0) await store.passOver(kept);
      let reading = await measure();
      const reclaimed = over(reading, evictTo) ? await store.reclaimIndexes(sampleSize, evictPerRound, indexIdleSeconds) : 0;
      if (reclaimed > 0) reading = await measure();
      options.onEvicted?.(evicted, reading, reclaimed);
      if (!over(reading, evictTo)) return;
    }
  }

  // Single flight: however many loads ask, one reading (and one eviction) at a time per process.
  const measure = (): Promise<MemoryReading> => {
    measuring ??= store
      .read()
      .then((reading) => {
        [last, takenAt] = [reading, performance.now()];
        if (over(reading, evictFrom) && !evicting) {
          evicting = evictRounds()
            .catch((error: unknown) => options.onFailure?.(error))
            .finally(() => (evicting = null));
        }
        return reading;
      })
      .finally(() => (measuring = null));
    return measuring;
  };

  return {
    async admit() {
      let reading = last;
      if (performance.now() - takenAt >= sampleEveryMs) {
        const fresh = measure();
        // Only the first load waits for a reading; later ones go on the last while a new one is taken.
        if (reading === null) reading = await fresh;
        else fresh.catch((error: unknown) => options.onFailure?.(error));
      }
      if (reading && over(reading, refuseFrom)) throw overCapacity(reading);
    },
    reading: () => last,
    settled: async () => {
      await evicting;
    },
  };
}
