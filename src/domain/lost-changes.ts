// The changes this process acknowledged that a Redis failover may take back before
// any other store holds them: the old primary answered, and then neither its replica
// nor the relay read them. This process appends them to PostgreSQL itself.
//
// - As soon as a connection to Redis that served closes (a failover closes them all),
//   the changes acknowledged within the last `recentMs` that PostgreSQL lacks are
//   appended, before the promoted replica answers anything: reads answer from
//   PostgreSQL until the suspect targets are settled (target-loads.ts), and a target
//   lacking one of them is loaded again from PostgreSQL, with it. A close without a
//   failover appends what the pipeline is still carrying; it applies once, as its
//   version makes every repeat a no-op.
// - Once a new history is settled, every change acknowledged under the old one that
//   neither PostgreSQL nor Redis's target holds (a failover or an AOF loses a suffix
//   of a target's changes, so a target of the same epoch whose version reached the
//   change's holds it; one loaded again since tells nothing, and PostgreSQL decides)
//   is appended too. What cannot be is reported, with its pair, in the log and a
//   metric (likes_redis_lost_acknowledged_changes_total). REDIS_REPLICA_ACKS is what
//   keeps a failover from taking them back at all.
import { setTimeout as sleep } from "node:timers/promises";
import type { AcknowledgedChange, AcknowledgedChanges } from "./acknowledged-changes.js";
import type { RelationChange, Target } from "./model/index.js";
import { RedisFollowUpError } from "./persistence.js";
import type { PairVersions } from "./ports/index.js";

export interface LostChangeCheck {
  /** As a connection to Redis that served closes at `atMs` (performance.now()): appends what PostgreSQL lacks of the changes acknowledged just before. */
  appendRecent(atMs: number): Promise<void>;
  /** Checks the changes acknowledged before `episodeAtMs`, once the pipeline had its time, and appends what no store holds. */
  check(episodeAtMs: number): Promise<void>;
  /** Acknowledged changes PostgreSQL lacked that this process appended since start. */
  appended(): number;
  /** Acknowledged changes found in no store that could not be appended, since start. */
  lost(): number;
  /** Appends nothing more (the process stops). */
  close(): void;
}

export interface LostChangeDeps {
  readonly journal: AcknowledgedChanges;
  readonly versions: PairVersions;
  /**
   * Per change in order, whether Redis's target stamped it: held in the change's epoch, at a
   * version as new as the change's (its changes are kept in order, so it holds this one).
   */
  readonly redisHolds: (changes: readonly AcknowledgedChange[]) => Promise<boolean[]>;
  /** The author each target credits, in order (null for a user, or when unknown). */
  readonly authors: (targets: readonly Target[]) => Promise<(bigint | null)[]>;
  /**
   * Applies changes to PostgreSQL as the pipeline does, answering those newer than what it
   * held; RedisFollowUpError when PostgreSQL committed but Redis did not follow.
   */
  readonly persist: (changes: readonly RelationChange[]) => Promise<{ readonly passed: readonly unknown[] }>;
  /** How long before a connection closed a change may still be on its way to PostgreSQL: the pipeline's lingers and a margin. */
  readonly recentMs: number;
  /** Told of the changes PostgreSQL lacked when asked and that were appended, and how many it took as newer (the pipeline may have committed the others meanwhile). */
  readonly onAppended: (changes: readonly AcknowledgedChange[], reason: "connection" | "failover", passed: number) => void;
  readonly onLost: (changes: readonly AcknowledgedChange[], cause: unknown) => void;
  /** Told when Redis did not take what follows appended changes (credits, lists) for `followUpMs`. */
  readonly onFollowUpFailure: (cause: unknown) => void;
  /** How long the follow-ups in Redis are tried again; default 60 s. */
  readonly followUpMs?: number;
}

/** Pairs asked of PostgreSQL, or applied, in one statement at most. */
const pairsPerQuery = 1_000;
const followUpRetryMs = 1_000;

/** What both ways in share: the counts so far, whether the process stopped, and the single append in flight. */
class Appends {
  lost = 0;
  appended = 0;
  closed = false;
  running: Promise<void> | null = null;
  // The moments asked for while an append ran: the changes from the earliest's window to the latest.
  pending: { fromMs: number; toMs: number } | null = null;
}

/** What every step below takes. */
interface Check {
  readonly deps: LostChangeDeps;
  readonly followUpMs: number;
  readonly appends: Appends;
}

/** Of `changes`, those PostgreSQL lacks, and (when asked) Redis's target too. */
async function missing(deps: LostChangeDeps, changes: readonly AcknowledgedChange[], askRedis: boolean): Promise<AcknowledgedChange[]> {
  const found: AcknowledgedChange[] = [];
  for (let i = 0; i < changes.length; i += pairsPerQuery) {
    const slice = changes.slice(i, i + pairsPerQuery);
    const [persisted, inRedis] = await Promise.all([deps.versions.newest(slice), askRedis ? deps.redisHolds(slice) : slice.map(() => false)]);
    slice.forEach((change, j) => {
      const version = persisted[j];
      if ((version === null || version === undefined || version < change.version) && !inRedis[j]) found.push(change);
    });
  }
  return found;
}

/**
 * Commits the changes to PostgreSQL, which is what makes them safe; what follows in Redis
 * (authors' credits, users' lists) is tried again in the background while Redis is away
 * (a failover): a persist of the same changes finds them applied and does only that.
 */
async function append(check: Check, changes: readonly AcknowledgedChange[]): Promise<number> {
  let passed = 0;
  for (let i = 0; i < changes.length; i += pairsPerQuery) {
    const slice = changes.slice(i, i + pairsPerQuery);
    const authors = await check.deps.authors(slice.map((c) => c.target));
    const relationChanges = slice.map((c, j): RelationChange => ({
      kind: "relation",
      relation: c.relation,
      target: c.target,
      userId: c.userId,
      authorId: c.relation === "follow" ? null : (authors[j] ?? null),
      member: c.member,
      version: c.version,
      at: c.at,
    }));
    try {
      passed += (await check.deps.persist(relationChanges)).passed.length;
    } catch (error) {
      if (!(error instanceof RedisFollowUpError)) throw error;
      // Committed, how many newer than what PostgreSQL held not told: all, at most.
      passed += relationChanges.length;
      void followUp(check, relationChanges);
    }
  }
  return passed;
}

async function followUp({ deps, followUpMs, appends }: Check, changes: readonly RelationChange[]): Promise<void> {
  const until = Date.now() + followUpMs;
  let cause: unknown;
  while (!appends.closed && Date.now() < until) {
    await sleep(followUpRetryMs, undefined, { ref: false });
    if (appends.closed) return;
    try {
      await deps.persist(changes);
      return;
    } catch (error) {
      cause = error;
    }
  }
  if (!appends.closed) deps.onFollowUpFailure(cause);
}

async function appendMissing(check: Check, changes: readonly AcknowledgedChange[], askRedis: boolean, reason: "connection" | "failover"): Promise<void> {
  const { deps, appends } = check;
  if (appends.closed) return;
  const absent = await missing(deps, changes, askRedis);
  if (absent.length === 0 || appends.closed) return;
  let passed: number;
  try {
    passed = await append(check, absent);
  } catch (error) {
    if (reason === "connection") throw error;
    appends.lost += absent.length;
    deps.onLost(absent, error);
    return;
  }
  // Those the pipeline had not committed meanwhile: on a close without a failover, few or none.
  appends.appended += passed;
  if (passed > 0) deps.onAppended(absent, reason, passed);
}

function appendRecent(check: Check, atMs: number): Promise<void> {
  const { appends } = check;
  if (appends.closed) return Promise.resolve();
  // Connections close together (a failover closes every one): one append at a time; the moments
  // asked meanwhile are covered next, from the earliest's window to the latest, whatever became of this one.
  appends.pending = {
    fromMs: Math.min(appends.pending?.fromMs ?? Infinity, atMs - check.deps.recentMs),
    toMs: Math.max(appends.pending?.toMs ?? -Infinity, atMs + 1),
  };
  if (appends.running) return appends.running;
  appends.running = appendPending(check).finally(() => (appends.running = null));
  return appends.running;
}

async function appendPending(check: Check): Promise<void> {
  const { deps, appends } = check;
  const failures: Error[] = [];
  while (appends.pending && !appends.closed) {
    const { fromMs, toMs } = appends.pending;
    appends.pending = null;
    await appendMissing(check, deps.journal.within(fromMs, toMs), false, "connection").catch((error: unknown) => {
      failures.push(error instanceof Error ? error : new Error(String(error)));
      // Another moment asked meanwhile tries this window again with its own.
      if (appends.pending) appends.pending = { ...appends.pending, fromMs: Math.min(appends.pending.fromMs, fromMs) };
    });
  }
  if (failures[0]) throw failures[0];
}

export function createLostChangeCheck(deps: LostChangeDeps): LostChangeCheck {
  const check: Check = { deps, followUpMs: deps.followUpMs ?? 60_000, appends: new Appends() };
  const { appends } = check;
  return {
    appendRecent: (atMs) => appendRecent(check, atMs),
    check: (episodeAtMs) => (appends.closed ? Promise.resolve() : appendMissing(check, deps.journal.before(episodeAtMs), true, "failover")),
    appended: () => appends.appended,
    lost: () => appends.lost,
    close() {
      appends.closed = true;
    },
  };
}
