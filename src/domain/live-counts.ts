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
import { DomainError, ErrorCode } from "../errors.js";
import type { ColdReads } from "./counters.js";
import { Stream, type CountStream } from "./count-stream.js";
import type { CountChanges } from "./ports/index.js";
import {
  heard,
  keepUnheard,
  post,
  readCounts,
  release,
  stopRelistening,
  WatchedPosts,
  type LivePosts,
  type ReadCounts,
  type WatchedPost,
} from "./watched-posts.js";

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
  readonly read: ReadCounts;
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

/** What a subscription's steps take: the posts watched and how, and the bounds of a new subscription. */
interface LiveWatch extends LivePosts {
  readonly maxPosts: number;
  readonly outOfReach?: (error: unknown) => boolean;
}

async function watch(live: LiveWatch, postIds: readonly bigint[], first?: ColdReads): Promise<CountStream> {
  const { watched, maxPosts } = live;
  const ids = [...new Set(postIds)];
  const fresh = ids.filter((id) => !watched.posts.has(id));
  if (watched.posts.size + fresh.length > maxPosts) {
    throw new DomainError(ErrorCode.SERVICE_UNAVAILABLE, `This server watches as many posts as it may (${maxPosts}); subscribe again later or to fewer posts.`);
  }
  const stream = new Stream(ids, live.intervalMs, (ended) => release(live, ended));
  watched.streams.add(stream);
  await join(live, stream, ids, listenFresh(live, fresh));
  await sendFirst(live, stream, ids, first);
  return stream;
}

/** Listens to posts no stream watched before; resolves once Redis confirmed it, or once Redis is found out of reach. */
function listenFresh(live: LiveWatch, fresh: readonly bigint[]): Promise<void> {
  const listened =
    fresh.length > 0
      ? live.changes.listen(fresh.map(post)).catch((error: unknown) => {
          if (!live.outOfReach?.(error)) throw error;
          // Watched all the same: the first counts come from PostgreSQL, changes once Redis is back.
          keepUnheard(live, fresh);
          live.onListenFailure?.(error);
        })
      : Promise.resolve();
  // Answered through `listening`; this keeps a failure from counting as unhandled meanwhile.
  listened.catch(() => {});
  return listened;
}

/** Adds the stream to the watchers of its posts and waits until each is listened to; when one is not, ends it with the failure. */
async function join(live: LiveWatch, stream: Stream, ids: readonly bigint[], listened: Promise<void>): Promise<void> {
  const { posts } = live.watched;
  const waits = new Set<Promise<void>>();
  for (const id of ids) {
    let entry = posts.get(id);
    if (!entry)
      posts.set(
        id,
        (entry = { streams: new Set(), readAt: Number.NEGATIVE_INFINITY, changed: false, reading: false, timer: null, listening: listened, reads: 0 }),
      );
    entry.streams.add(stream);
    waits.add(entry.listening);
  }
  try {
    await Promise.all(waits);
  } catch (error) {
    await dropUnheard(live.watched, ids);
    stream.end();
    throw error;
  }
}

/**
 * A post whose subscription Redis did not confirm is dropped with every stream watching it,
 * rather than watched without being heard; the next subscription to it listens afresh.
 */
async function dropUnheard({ posts }: WatchedPosts, ids: readonly bigint[]): Promise<void> {
  for (const id of ids) {
    const entry = posts.get(id);
    if (
      !entry ||
      (await entry.listening.then(
        () => true,
        () => false,
      ))
    )
      continue;
    for (const other of [...entry.streams]) other.end();
    posts.delete(id);
  }
}

async function sendFirst(live: LiveWatch, stream: Stream, ids: readonly bigint[], first?: ColdReads): Promise<void> {
  // The current counts first, read once Redis confirmed the listening: a change made before
  // the read is in them and one made after it is heard, so none falls between the two.
  // Numbered as any read: a change read and sent while this one waited (a cold post rebuilt) is not overtaken.
  const readNumbers = ids.map((id) => {
    const entry = live.watched.posts.get(id) as WatchedPost;
    return ++entry.reads;
  });
  try {
    const counts = await readCounts(live, ids, first);
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
    live.onReadFailure?.(error);
    // Read again as on a change (at once for a post never read), for every stream watching them.
    for (const id of ids) heard(live, post(id));
  }
}

export function createLiveCounts(options: LiveCountsOptions): LiveCounts {
  const live: LiveWatch = {
    ...options,
    intervalMs: options.intervalMs ?? 1_000,
    relistenEveryMs: options.relistenEveryMs ?? 1_000,
    watched: new WatchedPosts(),
  };
  const { watched } = live;
  options.changes.onChange((target) => heard(live, target));
  return {
    watch: (postIds, first) => watch(live, postIds, first),
    stats: () => ({ posts: watched.posts.size, streams: watched.streams.size }),
    close() {
      stopRelistening(watched);
      for (const stream of [...watched.streams]) stream.end();
    },
  };
}
