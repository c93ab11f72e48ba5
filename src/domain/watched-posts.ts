// The posts one process watches for its live-counts subscriptions: read once for
// all of their streams when they change (live-counts.ts says how often), and
// listened to again while Redis was out of reach to hear them.
import { performance } from "node:perf_hooks";
import type { Stream } from "./count-stream.js";
import type { ColdReads } from "./counters.js";
import type { Counts, Target } from "./model/index.js";
import type { CountChanges } from "./ports/index.js";

/** The read of posts' counts a live-counts service is handed (LiveCountsOptions.read). */
export type ReadCounts = (targets: readonly Target[], cold?: ColdReads) => Promise<Counts[]>;

export interface WatchedPost {
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

/** The posts this process watches and the streams watching them, shared by every subscription. */
export class WatchedPosts {
  readonly posts = new Map<bigint, WatchedPost>();
  readonly streams = new Set<Stream>();
  /** Posts whose read is due, read together on the next turn of the event loop. */
  readonly due = new Set<bigint>();
  readScheduled = false;
  /** Posts watched whose changes Redis was out of reach to be listened to. */
  readonly unheard = new Set<bigint>();
  relisten: NodeJS.Timeout | null = null;
}

/** What every function below takes: how posts are heard and read, how often, whom to tell of failures, and the posts watched. */
export interface LivePosts {
  readonly changes: CountChanges;
  readonly read: ReadCounts;
  readonly intervalMs: number;
  readonly relistenEveryMs: number;
  readonly onReadFailure?: (error: unknown) => void;
  readonly onListenFailure?: (error: unknown) => void;
  readonly watched: WatchedPosts;
}

export const post = (id: bigint): Target => ({ type: "post", id });

/** A monotonic clock: a wall clock stepped back would hold every read and message for as long as the step. */
const now = () => performance.now();

/** Posts read in one round trip at most, a feed page's worth. */
const readSlice = 100;

/** The counts of `ids`; after a reconnect every watched post is due at once: read in slices, not one pipeline of all. */
export async function readCounts({ read }: LivePosts, ids: readonly bigint[], cold?: ColdReads): Promise<Counts[]> {
  const counts: Counts[] = [];
  for (let i = 0; i < ids.length; i += readSlice) counts.push(...(await read(ids.slice(i, i + readSlice).map(post), cold)));
  return counts;
}

/** Listens to the posts not listened to yet; those Redis still cannot take wait for the next try. */
function listenAgain(live: LivePosts): void {
  const { watched } = live;
  const ids = [...watched.unheard].filter((id) => watched.posts.has(id));
  watched.unheard.clear();
  if (ids.length === 0) return stopRelistening(watched);
  live.changes.listen(ids.map(post)).then(
    // Changes made while nobody listened: each post is read once more.
    () => ids.forEach((id) => heard(live, post(id))),
    (error: unknown) => {
      for (const id of ids) if (watched.posts.has(id)) watched.unheard.add(id);
      live.onListenFailure?.(error);
    },
  );
}

export function stopRelistening(watched: WatchedPosts): void {
  if (watched.relisten) clearInterval(watched.relisten);
  watched.relisten = null;
}

export function keepUnheard(live: LivePosts, ids: readonly bigint[]): void {
  const { watched } = live;
  for (const id of ids) watched.unheard.add(id);
  watched.relisten ??= setInterval(() => listenAgain(live), live.relistenEveryMs);
  watched.relisten.unref();
}

function schedule(live: LivePosts, postId: bigint, entry: WatchedPost): void {
  if (entry.reading || entry.timer || !entry.changed) return;
  const wait = entry.readAt + live.intervalMs - now();
  if (wait <= 0) {
    queueRead(live, postId);
    return;
  }
  entry.timer = setTimeout(() => {
    entry.timer = null;
    queueRead(live, postId);
  }, wait);
}

function queueRead(live: LivePosts, postId: bigint): void {
  const { watched } = live;
  watched.due.add(postId);
  if (watched.readScheduled) return;
  watched.readScheduled = true;
  setImmediate(() => void readDue(live));
}

async function readDue(live: LivePosts): Promise<void> {
  const { watched } = live;
  watched.readScheduled = false;
  const ids = [...watched.due].filter((id) => watched.posts.get(id)?.changed);
  watched.due.clear();
  if (ids.length === 0) return;
  const entries = ids.map((id) => watched.posts.get(id) as WatchedPost);
  const readNumbers = entries.map((entry) => ++entry.reads);
  for (const entry of entries) {
    entry.changed = false;
    entry.reading = true;
  }
  try {
    const counts = await readCounts(live, ids);
    // The interval runs from when the counts went out, so a slow read cannot bring two messages closer.
    const readAt = now();
    for (const entry of entries) entry.readAt = readAt;
    ids.forEach((id, i) => {
      const entry = watched.posts.get(id);
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
    live.onReadFailure?.(error);
  } finally {
    ids.forEach((id, i) => {
      const entry = entries[i] as WatchedPost;
      entry.reading = false;
      if (watched.posts.get(id) === entry) schedule(live, id, entry);
    });
  }
}

export function heard(live: LivePosts, target: Target | null): void {
  const { watched } = live;
  if (target === null) {
    // The subscribing connection is back: posts it could not take before are listened to now.
    if (watched.unheard.size > 0) listenAgain(live);
    // The feed may have missed changes (its connection dropped): every post is read again.
    for (const [id, entry] of watched.posts) {
      entry.changed = true;
      schedule(live, id, entry);
    }
    return;
  }
  if (target.type !== "post") return;
  const entry = watched.posts.get(target.id);
  if (!entry) return;
  entry.changed = true;
  schedule(live, target.id, entry);
}

export function release(live: LivePosts, stream: Stream): void {
  const { watched } = live;
  watched.streams.delete(stream);
  const unwatched: Target[] = [];
  for (const id of stream.postIds) {
    const entry = watched.posts.get(id);
    if (!entry) continue;
    entry.streams.delete(stream);
    if (entry.streams.size > 0) continue;
    if (entry.timer) clearTimeout(entry.timer);
    watched.posts.delete(id);
    unwatched.push(post(id));
  }
  if (unwatched.length > 0) live.changes.ignore(unwatched).catch((error: unknown) => live.onListenFailure?.(error));
}
