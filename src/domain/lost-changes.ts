// After a Redis failover (a load found a target held from another replication
// history, target-loads.ts): which changes this process acknowledged under the old
// history no store holds. PostgreSQL lacks it, and Redis's target has not stamped it
// (a failover or an AOF loses a suffix of a target's changes, so a target of the
// same epoch whose version reached the change's holds it; one loaded again since,
// of a newer epoch, tells nothing, and PostgreSQL decides): the promoted replica
// lacks it and the relay never read it. Each is reported, with its pair, in the log
// and a metric (likes_redis_lost_acknowledged_changes_total). REDIS_REPLICA_ACKS is
// what prevents them.
import type { AcknowledgedChange, AcknowledgedChanges } from "./acknowledged-changes.js";
import type { PairVersions } from "./ports/index.js";

export interface LostChangeCheck {
  /** Checks the changes acknowledged before `episodeAtMs` (performance.now()), once the pipeline had its time. */
  check(episodeAtMs: number): Promise<void>;
  /** Acknowledged changes found lost since start. */
  lost(): number;
}

/** Pairs asked of PostgreSQL in one statement at most. */
const pairsPerQuery = 1_000;

export function createLostChangeCheck(deps: {
  readonly journal: AcknowledgedChanges;
  readonly versions: PairVersions;
  /**
   * Per change in order, whether Redis's target stamped it: held in the change's epoch, at a
   * version as new as the change's (its changes are kept in order, so it holds this one).
   */
  readonly redisHolds: (changes: readonly AcknowledgedChange[]) => Promise<boolean[]>;
  readonly onLost: (changes: readonly AcknowledgedChange[]) => void;
}): LostChangeCheck {
  let lost = 0;
  return {
    async check(episodeAtMs) {
      const acknowledged = deps.journal.before(episodeAtMs);
      const missing: AcknowledgedChange[] = [];
      for (let i = 0; i < acknowledged.length; i += pairsPerQuery) {
        const slice = acknowledged.slice(i, i + pairsPerQuery);
        const [persisted, inRedis] = await Promise.all([deps.versions.newest(slice), deps.redisHolds(slice)]);
        slice.forEach((change, j) => {
          const version = persisted[j];
          if ((version === null || version === undefined || version < change.version) && !inRedis[j]) missing.push(change);
        });
      }
      lost += missing.length;
      if (missing.length > 0) deps.onLost(missing);
    },
    lost: () => lost,
  };
}
