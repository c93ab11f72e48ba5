// After a Redis failover (a load found a target held from another replication
// history, target-loads.ts): which changes this process acknowledged under the old
// history never reached PostgreSQL. The promoted replica lacks them, and the relay
// never read them, so no store holds them: each is reported, with its pair, in the
// log and a metric (likes_redis_lost_acknowledged_changes_total). REDIS_REPLICA_ACKS
// is what prevents them.
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
  readonly onLost: (changes: readonly AcknowledgedChange[]) => void;
}): LostChangeCheck {
  let lost = 0;
  return {
    async check(episodeAtMs) {
      const acknowledged = deps.journal.before(episodeAtMs);
      const missing: AcknowledgedChange[] = [];
      for (let i = 0; i < acknowledged.length; i += pairsPerQuery) {
        const slice = acknowledged.slice(i, i + pairsPerQuery);
        const held = await deps.versions.newest(slice);
        slice.forEach((change, j) => {
          const version = held[j];
          if (version === null || version === undefined || version < change.version) missing.push(change);
        });
      }
      lost += missing.length;
      if (missing.length > 0) deps.onLost(missing);
    },
    lost: () => lost,
  };
}
