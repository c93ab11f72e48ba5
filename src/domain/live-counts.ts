// Live counts: the counts of posts that subscribers watch, sent first as they are
// when the subscription starts, then when they change.
//
// Every change of a post announces itself on Redis pub/sub (the scripts do, in the
// same atomic step), so every API process hears of changes made by any other. A
// process listens only to the posts its own subscribers watch, and reads a post's
// counts once for all of them: at once when it first hears of a change, then at
// most once an interval while changes keep coming, and the last change of a burst
// is always read. So a post taking thousands of likes a second costs one read a
// second per process, and each subscriber gets at most one message a second per
// post, the first one without waiting.
//
// What each subscriber holds is bounded: at most the newest counts of each of its
// posts, superseded in place while it is slow to take them.
import { performance } from "node:perf_hooks";
import { DomainError, ErrorCode } from "../errors.js";
import type { ColdReads } from "./counters.js";
import type { Counts, Target } from "./model/index.js";
import { Stream, type CountStream } from "./count-stream.js";
import type { CountChanges } from "./ports/index.js";

export type { CountStream, PostCountsUpdate } from "./count-stream.js";

export interface LiveCounts {
  /**
   * New counts of these posts as they change, at most once an interval per post,
   * the first message their counts as they stand (`first` says what reading them from
   * PostgreSQL may spend, for posts Redis does not hold); resolves once changes of them
   * are heard, or once Redis is found out of reach (they are heard once it is back).
   * Throws the coded refusal of the first read (RATE_LIMITED) with no stream left behind.
   */
  watch(postIds: readonly bigint[], first?: ColdReads): Promise<CountStream>;
  /** Posts watched by this process, and subscriptions watching them. */
  stats(): { readonly posts: number; readonly streams: number };
  /** Ends every stream. */
  close(): void;
}

export interface LiveCountsOptions {
  readonly changes: CountChanges;
  /** Reads the counts of posts, in one round trip; `cold` says what reading posts Redis does not hold may spend. */
  readonly read: (targets: readonly Target[], cold?: ColdReads) => Promise<Counts[]>;
  /**
   * Whether a failed listen says Redis is out of reach: its posts are then watched all
   * the same (their first counts read from PostgreSQL) and listened to again every
   * `relistenEveryMs` and whenever the subscribing connection is back.
   */
  readonly outOfReach?: (error: unknown) => boolean;
  /** How often posts not listened to yet (Redis out of reach) are tried again; default 1,000 ms. */
  readonly relistenEveryMs?: number;
  /** The shortest time between two reads (and messages) of one post; default 1,000 ms. */
  readonly intervalMs?: number;
  /** Distinct posts one process watches at most; a subscription past it is refused. */
  readonly maxPosts: number;
  readonly onReadFailure?: (error: unknown) => void;
  readonly onListenFailure?: (error: unknown) => void;
}

interface WatchedPost {
  readonly streams: Set<Stream>;
  /** When its counts last came back from a read (ms on the monotonic clock); -Infinity before the first read. */
  readAt: number;
  /** A change was heard that no read started since has seen. */
  changed: boolean;
  reading: boolean;
  timer: NodeJS.Timeout | null;
  /** Resolves once Redis confirmed the subscription; every stream of the post waits for it. */
  listening: Promise<void>;
  /** Reads of its counts started so far: a read's number orders what it found against other reads'. */
  reads: number;
}

const post = (id: bigint): Target => ({ type: "post", id });

/** A monotonic clock: a wall clock stepped back would hold every read and message for as long as the step. */
const now = () => performance.now();

/** Posts read in one round trip at most, a feed page's worth. */
const readSlice = 100;

// eslint-disable-next-line max-lines-per-function -- a service's methods share the watched posts and their streams in one closure; each is short.
export function createLiveCounts(options: LiveCountsOptions): LiveCounts {
  const { changes, read, maxPosts } = options;
  const intervalMs = options.intervalMs ?? 1_000;
  const watched = new Map<bigint, WatchedPost>();
  const streams = new Set<Stream>();
  /** Posts whose read is due, read together on the next turn of the event loop. */
  const due = new Set<bigint>();
  let readScheduled = false;

  /** Posts watched whose changes Redis was out of reach to be listened to. */
  const unheard = new Set<bigint>();
  let relisten: NodeJS.Timeout | null = null;

  /** The counts of `ids`; after a reconnect every watched post is due at once: read in slices, not one pipeline of all. */
  async function readCounts(ids: readonly bigint[], cold?: ColdReads): Promise<Counts[]> {
    const counts: Counts[] = [];
    for (let i = 0; i < ids.length; i += readSlice) counts.push(...(await read(ids.slice(i, i + readSlice).map(post), cold)));
    return counts;
  }

  /** Listens to the posts not listened to yet; those Redis still cannot take wait for the next try. */
  function listenAgain(): void {
    const ids = [...unheard].filter((id) => watched.has(id));
    unheard.clear();
    if (ids.length === 0) return stopRelistening();
    changes.listen(ids.map(post)).then(
      // Changes made while nobody listened: each post is read once more.
      () => ids.forEach((id) => heard(post(id))),
      (error: unknown) => {
        for (const id of ids) if (watched.has(id)) unheard.add(id);
        options.onListenFailure?.(error);
      },
    );
  }

  function stopRelistening(): void {
    if (relisten) clearInterval(relisten);
    relisten = null;
  }

  function keepUnheard(ids: readonly bigint[]): void {
    for (const id of ids) unheard.add(id);
    relisten ??= setInterval(listenAgain, options.relistenEveryMs ?? 1_000);
    relisten.unref();
  }

  function schedule(postId: bigint, entry: WatchedPost): void {
    if (entry.reading || entry.timer || !entry.changed) return;
    const wait = entry.readAt + intervalMs - now();
    if (wait <= 0) {
      queueRead(postId);
      return;
    }
    entry.timer = setTimeout(() => {
      entry.timer = null;
      queueRead(postId);
    }, wait);
  }

  function queueRead(postId: bigint): void {
    due.add(postId);
    if (readScheduled) return;
    readScheduled = true;
    setImmediate(() => void readDue());
  }

  async function readDue(): Promise<void> {
    readScheduled = false;
    const ids = [...due].filter((id) => watched.get(id)?.changed);
    due.clear();
    if (ids.length === 0) return;
    const entries = ids.map((id) => watched.get(id) as WatchedPost);
    const readNumbers = entries.map((entry) => ++entry.reads);
    for (const entry of entries) {
      entry.changed = false;
      entry.reading = true;
    }
    try {
      const counts = await readCounts(ids);
      // The interval runs from when the counts went out, so a slow read cannot bring two messages closer.
      const readAt = now();
      for (const entry of entries) entry.readAt = readAt;
      ids.forEach((id, i) => {
        const entry = watched.get(id);
        const value = counts[i];
        if (entry && value) for (const stream of entry.streams) stream.offer(id, value, readNumbers[i] as number);
      });
    } catch (error) {
      // Read again after the interval: the change is still to be told.
      const failedAt = now();
      for (const entry of entries) {
        entry.changed = true;
        entry.readAt = failedAt;
      }
      options.onReadFailure?.(error);
    } finally {
      ids.forEach((id, i) => {
        const entry = entries[i] as WatchedPost;
        entry.reading = false;
        if (watched.get(id) === entry) schedule(id, entry);
      });
    }
  }

  function heard(target: Target | null): void {
    if (target === null) {
      // The subscribing connection is back: posts it could not take before are listened to now.
      if (unheard.size > 0) listenAgain();
      // The feed may have missed changes (its connection dropped): every post is read again.
      for (const [id, entry] of watched) {
        entry.changed = true;
        schedule(id, entry);
      }
      return;
    }
    if (target.type !== "post") return;
    const entry = watched.get(target.id);
    if (!entry) return;
    entry.changed = true;
    schedule(target.id, entry);
  }
  changes.onChange(heard);

  function release(stream: Stream): void {
    streams.delete(stream);
    const unwatched: Target[] = [];
    for (const id of stream.postIds) {
      const entry = watched.get(id);
      if (!entry) continue;
      entry.streams.delete(stream);
      if (entry.streams.size > 0) continue;
      if (entry.timer) clearTimeout(entry.timer);
      watched.delete(id);
      unwatched.push(post(id));
    }
    if (unwatched.length > 0) changes.ignore(unwatched).catch((error: unknown) => options.onListenFailure?.(error));
  }

  return {
    async watch(postIds, first) {
      const ids = [...new Set(postIds)];
      const fresh = ids.filter((id) => !watched.has(id));
      if (watched.size + fresh.length > maxPosts) {
        throw new DomainError(
          ErrorCode.SERVICE_UNAVAILABLE,
          `This server watches as many posts as it may (${maxPosts}); subscribe again later or to fewer posts.`,
        );
      }
      const stream = new Stream(ids, intervalMs, release);
      streams.add(stream);
      const listened =
        fresh.length > 0
          ? changes.listen(fresh.map(post)).catch((error: unknown) => {
              if (!options.outOfReach?.(error)) throw error;
              // Watched all the same: the first counts come from PostgreSQL, changes once Redis is back.
              keepUnheard(fresh);
              options.onListenFailure?.(error);
            })
          : Promise.resolve();
      // Answered through `listening`; this keeps a failure from counting as unhandled meanwhile.
      listened.catch(() => {});
      const waits = new Set<Promise<void>>();
      for (const id of ids) {
        let entry = watched.get(id);
        if (!entry)
          watched.set(
            id,
            (entry = { streams: new Set(), readAt: Number.NEGATIVE_INFINITY, changed: false, reading: false, timer: null, listening: listened, reads: 0 }),
          );
        entry.streams.add(stream);
        waits.add(entry.listening);
      }
      try {
        await Promise.all(waits);
      } catch (error) {
        // A post whose subscription Redis did not confirm is dropped with every stream watching it,
        // rather than watched without being heard; the next subscription to it listens afresh.
        for (const id of ids) {
          const entry = watched.get(id);
          if (
            !entry ||
            (await entry.listening.then(
              () => true,
              () => false,
            ))
          )
            continue;
          for (const other of [...entry.streams]) other.end();
          watched.delete(id);
        }
        stream.end();
        throw error;
      }
      // The current counts first, read once Redis confirmed the listening: a change made before
      // the read is in them and one made after it is heard, so none falls between the two.
      // Numbered as any read: a change read and sent while this one waited (a cold post rebuilt) is not overtaken.
      const readNumbers = ids.map((id) => {
        const entry = watched.get(id) as WatchedPost;
        return ++entry.reads;
      });
      try {
        const counts = await readCounts(ids, first);
        ids.forEach((id, i) => {
          const value = counts[i];
          if (value) stream.offer(id, value, readNumbers[i] as number);
        });
      } catch (error) {
        // A refusal of the caller's (its budget spent) ends the subscription; a store's failure is read again.
        if (error instanceof DomainError && error.code !== ErrorCode.SERVICE_UNAVAILABLE) {
          stream.end();
          throw error;
        }
        options.onReadFailure?.(error);
        // Read again as on a change (at once for a post never read), for every stream watching them.
        for (const id of ids) heard(post(id));
      }
      return stream;
    },
    stats: () => ({ posts: watched.size, streams: streams.size }),
    close() {
      stopRelistening();
      for (const stream of [...streams]) stream.end();
    },
  };
}
