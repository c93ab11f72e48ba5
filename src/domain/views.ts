// Views of posts: every reported view counts. A process adds views up in memory
// and flushes them to Redis at most once a second (or once 1,000 posts wait),
// one increment per post per flush, so a storm of views on one hot post costs
// about one Redis command a second per process. Redis appends each flush to the
// outbox, and the pipeline carries it to PostgreSQL like any change. What a
// process holds between flushes is lost if it dies: at most one flush window,
// or, while Redis refuses flushes, what waits for it.
//
// A flush that failed may have applied before its reply was lost; one held in a
// stalled connection runs past its deadline and counts nothing (the view store
// answers its failure only then). So it is retried as it was, under the same
// number; the post keeps the number of the last flush it took from this process
// (scripts/record-views.lua), so the retry counts once, and views that arrive
// meanwhile wait for a flush of their own. The post keeps that number ten
// minutes; a flush Redis still refuses after a minute is given up and its views
// reported lost, so an outage of Redis that long may lose the views in hand and
// never counts one twice.
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import pLimit from "p-limit";
import { badInput, DomainError, ErrorCode } from "../errors.js";
import type { Catalog } from "./catalog.js";
import { rebuildRounds, type CounterService } from "./counters.js";
import type { Target } from "./model/index.js";
import type { ViewFlush, ViewStore } from "./ports/index.js";

export const maxViewsPerCall = 100;

export interface ViewService {
  /** Counts one view per id (repeats count again); unknown ids are skipped. Answers how many were counted. */
  record(postIds: readonly bigint[]): Promise<number>;
  /** Sends what waits to Redis now. */
  flush(): Promise<void>;
  /** Refuses new views, flushes what waits (for `closeWithinMs` at most) and reports what Redis did not take as lost. */
  close(): Promise<void>;
}

export interface ViewServiceOptions {
  readonly store: ViewStore;
  readonly catalog: Catalog;
  readonly counters: CounterService;
  /** How long views wait in memory at most, in milliseconds. */
  readonly flushEveryMs?: number;
  /** Posts waiting that trigger a flush at once. */
  readonly flushAtPosts?: number;
  /**
   * Posts held at most while Redis refuses flushes (waiting, being flushed or to
   * retry): past it, calls with views of posts not already waiting are refused
   * (the error says so) rather than growing memory.
   */
  readonly maxWaitingPosts?: number;
  /** Told when a flush failed; its views wait for the next one. */
  readonly onFlushFailure?: (error: unknown) => void;
  /** Told when views are given up: a flush Redis refused for `retryForMs`, or what shutdown could not flush. */
  readonly onViewsLost?: (views: number, error: unknown) => void;
  /** How long a failed flush is retried under its number, in milliseconds: well under the ten minutes Redis keeps it. */
  readonly retryForMs?: number;
  /** How long shutdown keeps flushing what waits, in milliseconds. */
  readonly closeWithinMs?: number;
}

/**
 * Posts one flush asks to be loaded back into Redis at once. The process's rebuild
 * slots (counters.ts), shared with reads and writes, decide how many load together;
 * this keeps a flush of thousands of cold posts from filling their queue, so reads
 * still find room in it.
 */
const rebuildsAtOnce = 8;

/**
 * Posts' views in flight to Redis at once. A flush of views spread over 10,000
 * posts sent whole queues 10,000 script calls ahead of every other request on
 * the connection; sent this many at a time, other requests pass between them.
 */
const sendsAtOnce = 256;

export class ViewsNotLoadedError extends Error {
  override readonly name = "ViewsNotLoadedError";
  constructor(target: Target) {
    super(`Post ${target.id} kept leaving Redis right after being loaded; its views wait for the next flush.`);
  }
}

export class ViewsGivenUpError extends Error {
  override readonly name = "ViewsGivenUpError";
  constructor(reason: string) {
    super(`Views given up: ${reason}.`);
  }
}

const backlogged = (held: number) =>
  new DomainError(ErrorCode.SERVICE_UNAVAILABLE, `Views of ${held} posts wait for Redis, which does not take them: retry shortly.`);

const shuttingDown = () => new DomainError(ErrorCode.SERVICE_UNAVAILABLE, "This process is shutting down and takes no more views; retry shortly.");

/** A flush of one post's views: its number stays the same through every retry. */
interface PostFlush {
  readonly id: bigint;
  readonly count: number;
  readonly seq: number;
  /** When it was first sent, in ms: it is given up `retryForMs` after. */
  readonly since: number;
}

// eslint-disable-next-line max-lines-per-function -- a service's methods share the views held in memory and their flush in one closure; each is short.
export function createViewService(options: ViewServiceOptions): ViewService {
  const { store, catalog, counters } = options;
  const flushEveryMs = options.flushEveryMs ?? 1_000;
  const flushAtPosts = options.flushAtPosts ?? 1_000;
  const maxWaitingPosts = options.maxWaitingPosts ?? 100_000;
  const retryForMs = options.retryForMs ?? 60_000;
  const closeWithinMs = options.closeWithinMs ?? 5_000;
  const sender = randomUUID();
  let lastSeq = 0;
  const waiting = new Map<bigint, number>();
  /** Flushes that failed, per post: retried as they were until Redis takes them, or for `retryForMs`. */
  const retrying = new Map<bigint, PostFlush>();
  /** Posts in the flush under way: held too, though in neither map. */
  let inFlight = 0;
  const rebuildSlots = pLimit(rebuildsAtOnce);
  let flushing: Promise<void> | null = null;
  let closed = false;
  /** When shutdown stops sending: a send not started by then fails at once, and its views are reported lost. */
  let stopSendingAt = Number.POSITIVE_INFINITY;

  /** Adds one post's views in Redis, loading the post there first when it is not held. */
  async function send({ id, count, seq, since }: PostFlush): Promise<void> {
    const target: Target = { type: "post", id };
    const flush: ViewFlush = { sender, seq };
    // Checked before every send, a retry's included: a send past the deadline could run after Redis forgot the number.
    const add = () => {
      if (Date.now() - since >= retryForMs) throw new ViewsGivenUpError(`Redis refused them for ${retryForMs / 1000} s`);
      return store.add(target, count, flush);
    };
    let counted = await add();
    for (let round = 0; counted.kind === "unloaded"; round++) {
      if (round === rebuildRounds) throw new ViewsNotLoadedError(target);
      // A post that does not exist (checked when the views arrived, so deleted since) cannot be rebuilt: its views go.
      if (!(await rebuildSlots(() => counters.rebuild(target)))) return;
      counted = await add();
    }
  }

  async function flushOnce(): Promise<void> {
    if (waiting.size === 0 && retrying.size === 0) return;
    // A post with a flush to retry sends only that one: its newer views wait, so one post never has two flushes in doubt.
    const again = [...retrying.values()];
    retrying.clear();
    const retried = new Set(again.map((r) => r.id));
    const seq = ++lastSeq;
    const now = Date.now();
    const fresh = [...waiting].flatMap(([id, count]) => (retried.has(id) ? [] : [{ id, count, seq, since: now }]));
    for (const { id } of fresh) waiting.delete(id);
    const batch = [...again, ...fresh];
    inFlight = batch.length;
    const sendSlots = pLimit(sendsAtOnce);
    const sendInTime = (flush: PostFlush) =>
      Date.now() < stopSendingAt ? send(flush) : Promise.reject(new ViewsGivenUpError("the process shut down before they were sent"));
    await Promise.all(
      batch.map((flush) =>
        sendSlots(() => sendInTime(flush))
          .catch((error: unknown) => {
            if (Date.now() - flush.since < retryForMs) retrying.set(flush.id, flush);
            else options.onViewsLost?.(flush.count, error);
            options.onFlushFailure?.(error);
          })
          .finally(() => inFlight--),
      ),
    );
  }

  const flush = (): Promise<void> => {
    flushing ??= flushOnce().finally(() => (flushing = null));
    return flushing;
  };

  // Started by the first view, so a process that records none (a worker, a reconcile) runs no timer.
  let timer: NodeJS.Timeout | null = null;

  return {
    async record(postIds) {
      if (closed) throw shuttingDown();
      if (postIds.length > maxViewsPerCall) {
        throw badInput("postIds", `recordViews takes at most ${maxViewsPerCall} ids; got ${postIds.length}. Split the call.`);
      }
      timer ??= setInterval(() => void flush(), flushEveryMs).unref();
      const rows = await catalog.posts(postIds);
      // Shutdown may have flushed for the last time while the posts were looked up: nothing is added yet, so refusing is safe.
      if (closed) throw shuttingDown();
      const found = rows.flatMap((row) => (row ? [row.id] : []));
      // All or nothing: a call refused for the backlog counts none of its views, so its retry counts them once.
      const held = waiting.size + retrying.size + inFlight;
      const newPosts = new Set(found.filter((id) => !waiting.has(id)));
      if (newPosts.size > 0 && held + newPosts.size > maxWaitingPosts) throw backlogged(held);
      for (const id of found) waiting.set(id, (waiting.get(id) ?? 0) + 1);
      if (waiting.size >= flushAtPosts) void flush();
      return found.length;
    },
    flush,
    async close() {
      closed = true;
      if (timer) clearInterval(timer);
      stopSendingAt = Date.now() + closeWithinMs;
      await flushing;
      // A retried post's newer views go in the flush after the retry's, so one flush is not always enough.
      while ((waiting.size > 0 || retrying.size > 0) && Date.now() < stopSendingAt) {
        await flush();
        if (retrying.size > 0) await sleep(100);
      }
      const left = [...waiting.values(), ...[...retrying.values()].map((r) => r.count)].reduce((a, b) => a + b, 0);
      if (left > 0) options.onViewsLost?.(left, new ViewsGivenUpError("the process shut down before Redis took them"));
      waiting.clear();
      retrying.clear();
    },
  };
}
