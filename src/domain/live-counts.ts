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
import type { Counts, Target } from "./model/index.js";
import type { CountChanges } from "./ports/index.js";

export interface PostCountsUpdate {
  readonly postId: bigint;
  readonly counts: Counts;
}

/** What one subscription receives; `return()` (or a `for await` left) stops watching. */
export type CountStream = AsyncIterableIterator<PostCountsUpdate>;

export interface LiveCounts {
  /**
   * New counts of these posts as they change, at most once an interval per post;
   * resolves once changes of them are heard.
   */
  watch(postIds: readonly bigint[]): Promise<CountStream>;
  /** Posts watched by this process, and subscriptions watching them. */
  stats(): { readonly posts: number; readonly streams: number };
  /** Ends every stream. */
  close(): void;
}

export interface LiveCountsOptions {
  readonly changes: CountChanges;
  /** Reads the counts of posts, in one round trip. */
  readonly read: (targets: readonly Target[]) => Promise<Counts[]>;
  /** The shortest time between two reads (and messages) of one post; default 1,000 ms. */
  readonly intervalMs?: number;
  /** Distinct posts one process watches at most; a subscription past it is refused. */
  readonly maxPosts: number;
  readonly onReadFailure?: (error: unknown) => void;
  readonly onListenFailure?: (error: unknown) => void;
}

interface WatchedPost {
  readonly streams: Set<Stream>;
  /** When its counts last came back from a read (ms); 0 before the first read. */
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

/** One subscription: the newest counts of each of its posts not yet taken, and when each post was last sent. */
class Stream implements CountStream {
  private readonly waiting = new Map<bigint, Counts>();
  private readonly sentAt = new Map<bigint, number>();
  /** Per post, the number of the newest read offered: an older read that ends later is dropped. */
  private readonly offeredRead = new Map<bigint, number>();
  private wake: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;
  closed = false;

  constructor(
    readonly postIds: readonly bigint[],
    private readonly intervalMs: number,
    private readonly onClose: (stream: Stream) => void,
  ) {}

  /** Offers what read number `read` found; counts of an older read than one offered already are not sent. */
  offer(postId: bigint, counts: Counts, read: number): void {
    if (this.closed || read < (this.offeredRead.get(postId) ?? 0)) return;
    this.offeredRead.set(postId, read);
    this.waiting.set(postId, counts);
    this.wake?.();
  }

  /** The next post whose interval since it was last sent has passed, or how long until one's has. */
  private take(now: number): PostCountsUpdate | number {
    let soonest = Infinity;
    for (const [postId, counts] of this.waiting) {
      const readyAt = (this.sentAt.get(postId) ?? -Infinity) + this.intervalMs;
      if (readyAt <= now) {
        this.waiting.delete(postId);
        this.sentAt.set(postId, now);
        return { postId, counts };
      }
      soonest = Math.min(soonest, readyAt - now);
    }
    return soonest;
  }

  async next(): Promise<IteratorResult<PostCountsUpdate>> {
    while (!this.closed) {
      const taken = this.take(now());
      if (typeof taken !== "number") return { value: taken, done: false };
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        if (taken !== Infinity) this.timer = setTimeout(resolve, taken);
      });
      this.wake = null;
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
    }
    return { value: undefined, done: true };
  }

  async return(): Promise<IteratorResult<PostCountsUpdate>> {
    this.end();
    return { value: undefined, done: true };
  }

  end(): void {
    if (this.closed) return;
    this.closed = true;
    this.waiting.clear();
    this.wake?.();
    this.onClose(this);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}

// eslint-disable-next-line max-lines-per-function -- a service's methods share the watched posts and their streams in one closure; each is short.
export function createLiveCounts(options: LiveCountsOptions): LiveCounts {
  const { changes, read, maxPosts } = options;
  const intervalMs = options.intervalMs ?? 1_000;
  const watched = new Map<bigint, WatchedPost>();
  const streams = new Set<Stream>();
  /** Posts whose read is due, read together on the next turn of the event loop. */
  const due = new Set<bigint>();
  let readScheduled = false;

  /** The counts of `ids`; after a reconnect every watched post is due at once: read in slices, not one pipeline of all. */
  async function readCounts(ids: readonly bigint[]): Promise<Counts[]> {
    const counts: Counts[] = [];
    for (let i = 0; i < ids.length; i += readSlice) counts.push(...(await read(ids.slice(i, i + readSlice).map(post))));
    return counts;
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
    async watch(postIds) {
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
      const listened = fresh.length > 0 ? changes.listen(fresh.map(post)) : Promise.resolve();
      // Answered through `listening`; this keeps a failure from counting as unhandled meanwhile.
      listened.catch(() => {});
      const waits = new Set<Promise<void>>();
      for (const id of ids) {
        let entry = watched.get(id);
        if (!entry) watched.set(id, (entry = { streams: new Set(), readAt: 0, changed: false, reading: false, timer: null, listening: listened, reads: 0 }));
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
        const counts = await readCounts(ids);
        ids.forEach((id, i) => {
          const value = counts[i];
          if (value) stream.offer(id, value, readNumbers[i] as number);
        });
      } catch (error) {
        options.onReadFailure?.(error);
        // Read again as on a change (at once for a post never read), for every stream watching them.
        for (const id of ids) heard(post(id));
      }
      return stream;
    },
    stats: () => ({ posts: watched.size, streams: streams.size }),
    close() {
      for (const stream of [...streams]) stream.end();
    },
  };
}
