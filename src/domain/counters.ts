// Counts of targets: read from Redis, and rebuilt there from PostgreSQL when
// Redis does not hold a target (a new Redis, a flush, an evicted cold target).
import { setTimeout as sleep } from "node:timers/promises";
import { LRUCache } from "lru-cache";
import type { CounterHash } from "../stores/redis/counter-hash.js";
import type { CounterStore } from "../stores/redis/counter-store.js";
import type { RebuildStore } from "../stores/redis/rebuild-store.js";
import type { SnapshotStore } from "../stores/postgres/snapshot-store.js";
import { counterNames, targetKey, type Target, type TargetKey } from "./targets.js";

/** What PostgreSQL knows of a target: whether it exists and who wrote it. */
export type TargetLookup = (target: Target) => Promise<{ authorId: bigint | null } | null>;

export interface CounterService {
  /** Counter hashes of existing targets, in order; one Redis round trip when all are cached. */
  read(targets: readonly Target[]): Promise<CounterHash[]>;
  /**
   * Puts a target back into Redis from PostgreSQL (counts and membership), one
   * rebuild at a time across processes; false when the target does not exist.
   */
  rebuild(target: Target): Promise<boolean>;
  /**
   * Mirrors into Redis a change PostgreSQL already holds (written in the same
   * transaction as its cause). A target Redis does not hold is left alone: its
   * rebuild reads the new value from PostgreSQL.
   */
  mirror(target: Target, name: string, delta: number): Promise<void>;
  /** Marks a just-created target known to Redis with all its counters at zero. */
  initNew(target: Target, authorId?: bigint): Promise<void>;
}

export interface CounterServiceOptions {
  readonly counterStore: CounterStore;
  readonly rebuildStore: RebuildStore;
  readonly snapshots: SnapshotStore;
  readonly lookup: TargetLookup;
  /** How long an id found missing in PostgreSQL is answered as missing without asking again. */
  readonly missingTtlMs?: number;
  /** How long a rebuild may hold its lock before another process may take over. */
  readonly rebuildLockMs?: number;
  /** How long a request waits for another process's rebuild of the same target. */
  readonly rebuildWaitMs?: number;
}

const zeroCounts = (target: Target) => Object.fromEntries(counterNames[target.type].map((n) => [n, 0]));

export class RebuildTimeoutError extends Error {
  constructor(target: Target, waitedMs: number) {
    super(`${target.type} ${target.id} was still being rebuilt from PostgreSQL after ${waitedMs} ms.`);
  }
}

export function createCounterService(options: CounterServiceOptions): CounterService {
  const { counterStore, rebuildStore, snapshots, lookup } = options;
  const lockMs = options.rebuildLockMs ?? 120_000;
  const waitMs = options.rebuildWaitMs ?? 10_000;
  const missing = new LRUCache<TargetKey, true>({ max: 100_000, ttl: options.missingTtlMs ?? 30_000 });
  const rebuilding = new Map<TargetKey, Promise<boolean>>();

  const cached = async (target: Target) => (await counterStore.read([target]))[0] !== null;

  async function rebuildOnce(target: Target): Promise<boolean> {
    const key = targetKey(target);
    if (missing.has(key)) return false;
    const found = await lookup(target);
    if (!found) {
      missing.set(key, true);
      return false;
    }
    const started = Date.now();
    for (;;) {
      if (await cached(target)) return true;
      const token = await rebuildStore.lock(target, lockMs);
      if (token) {
        try {
          // Checked again under the lock: the previous holder may have just finished.
          if (await cached(target)) return true;
          const snapshot = await snapshots.read(target);
          await rebuildStore.write(target, {
            members: snapshot.members,
            counts: { ...zeroCounts(target), ...snapshot.counts },
            authorId: found.authorId,
            version: snapshot.version,
          });
          // Changes committed between the snapshot and the hash appearing were not replayed by
          // the consumer (it found no rebuilt hash): bring them in now. Repeats are harmless.
          for (const change of await snapshots.changesSince(target, snapshot.version)) {
            await rebuildStore.replay({ target, ...change });
          }
          return true;
        } finally {
          await rebuildStore.unlock(target, token);
        }
      }
      // Another process is rebuilding this target: wait for its counter hash to appear.
      if (Date.now() - started > waitMs) throw new RebuildTimeoutError(target, waitMs);
      await sleep(20);
    }
  }

  const rebuild = (target: Target): Promise<boolean> => {
    const key = targetKey(target);
    // Concurrent requests in this process share one rebuild.
    let pending = rebuilding.get(key);
    if (!pending) {
      pending = rebuildOnce(target).finally(() => rebuilding.delete(key));
      rebuilding.set(key, pending);
    }
    return pending;
  };

  return {
    rebuild,
    async read(targets) {
      const hashes = await counterStore.read(targets);
      const misses = targets.filter((_, i) => hashes[i] === null);
      if (misses.length === 0) return hashes as CounterHash[];
      await Promise.all(misses.map(rebuild));
      const reread = await counterStore.read(misses);
      let next = 0;
      return hashes.map(
        (hash, i) => hash ?? reread[next++] ?? { counts: zeroCounts(targets[i] as Target), generation: 0, authorId: null, version: 0n },
      );
    },
    async mirror(target, name, delta) {
      await counterStore.bump(target, name, delta);
    },
    async initNew(target, authorId) {
      missing.delete(targetKey(target));
      await counterStore.init(target, { [counterNames[target.type][0]]: 0 }, authorId);
    },
  };
}
