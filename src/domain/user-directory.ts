// Fills an API process's known users (known-users.ts), so that a bearer token's
// user is known to exist without SQL: every id that exists at start is read in
// the background, a bounded page per statement, and every user registered from
// then on is heard of from the process that registered them. Whatever it missed
// (an announcement lost, a row written by hand) authenticate looks up once.
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import type { KnownUsers } from "./known-users.js";
import type { UserAnnouncements, UserStore } from "./ports/index.js";
import { backoffMs } from "./backoff.js";

/** What loading found, for the log line that says it is done. */
export interface DirectoryLoad {
  readonly ids: number;
  readonly runs: number;
  readonly ms: number;
}

export interface UserDirectory {
  /** Resolves once every user that existed at start is known; with null if closed first. Never rejects. */
  readonly loaded: Promise<DirectoryLoad | null>;
  /** Whether the user is known to exist without asking PostgreSQL. */
  knows(userId: bigint): boolean;
  /** Stops loading and listening; resolves once no statement of its is in flight. */
  close(): Promise<void>;
}

export interface UserDirectoryOptions {
  readonly known: KnownUsers;
  readonly users: Pick<UserStore, "idRunsAfter">;
  /** Where new users are heard of; null where no subscribing connection is open. */
  readonly announcements: Pick<UserAnnouncements, "onAnnounced"> | null;
  /**
   * Ids one statement reads. About 7 ms of PostgreSQL per 10,000 (an index-only
   * scan), so each statement stays far below any statement timeout and holds a
   * pool connection briefly, whatever the number of users. Default 10,000.
   */
  readonly pageIds?: number;
  /** Wait after a failed page, doubling per failure in a row up to `maxRetryMs`. Defaults 1,000 and 30,000. */
  readonly retryMs?: number;
  readonly maxRetryMs?: number;
  readonly onLoaded?: (load: DirectoryLoad) => void;
  readonly onLoadFailure?: (err: unknown, retryInMs: number) => void;
  readonly onListenFailure?: (err: unknown) => void;
}

export function startUserDirectory(options: UserDirectoryOptions): UserDirectory {
  const { known, users } = options;
  const pageIds = options.pageIds ?? 10_000;
  const retryMs = options.retryMs ?? 1_000;
  const maxRetryMs = options.maxRetryMs ?? 30_000;
  const stopping = new AbortController();

  // Listening starts with loading, not after it, so a user registered meanwhile is heard of or
  // read (one registered in the moment before SSUBSCRIBE is answered may be neither: looked up once).
  const listening = options.announcements
    ? options.announcements
        .onAnnounced((userId) => known.add(userId))
        .then(
          async (stop) => {
            if (!stopping.signal.aborted) return stop;
            await stop().catch(() => {});
            return null;
          },
          (err: unknown) => {
            options.onListenFailure?.(err);
            return null;
          },
        )
    : Promise.resolve(null);

  const load = async (): Promise<DirectoryLoad | null> => {
    const startedAt = performance.now();
    let after = 0n;
    let failures = 0;
    while (!stopping.signal.aborted) {
      let ids = 0;
      try {
        const runs = await users.idRunsAfter(after, pageIds);
        known.addRuns(runs);
        for (const run of runs) ids += Number(run.last - run.first + 1n);
        after = runs.at(-1)?.last ?? after;
        failures = 0;
      } catch (err) {
        const waitMs = backoffMs(failures++, { firstMs: retryMs, maxMs: maxRetryMs });
        options.onLoadFailure?.(err, waitMs);
        await sleep(waitMs, undefined, { signal: stopping.signal }).catch(() => {});
        continue;
      }
      if (ids < pageIds) {
        known.loaded = true;
        const done = { ids: known.ids, runs: known.runs, ms: Math.round(performance.now() - startedAt) };
        options.onLoaded?.(done);
        return done;
      }
    }
    return null;
  };
  const loaded = load();

  return {
    loaded,
    knows: (userId) => known.has(userId),
    async close() {
      stopping.abort();
      const stop = await listening;
      await stop?.().catch(() => {});
      await loaded;
    },
  };
}
