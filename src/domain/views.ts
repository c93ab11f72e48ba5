// Views of posts: every reported view counts. A process adds views up in memory
// and flushes them to Redis at most once a second (or once 1,000 posts wait),
// one increment per post per flush, so a storm of views on one hot post costs
// about one Redis command a second per process. Redis appends each flush to the
// outbox, and the pipeline carries it to PostgreSQL like any change. What a
// process holds between flushes is lost if it dies: at most one flush window.
//
// A flush that failed may still have reached Redis (a timeout while Redis stalls
// leaves the command to run later), so it is retried as it was, under the same
// flush id, which Redis's receipt of the first attempt recognises for a minute;
// views that arrive meanwhile wait for a flush of their own. Past that minute a
// retry could count its views twice, so a flush Redis refused that long is
// given up and its views reported lost: an outage of Redis that long may lose
// the views in hand, and never counts one twice.
import { randomUUID } from "node:crypto";
import pLimit from "p-limit";
import { badInput, DomainError, ErrorCode } from "../errors.js";
import type { Catalog } from "./catalog.js";
import { rebuildRounds, type CounterService } from "./counters.js";
import type { Target } from "./model.js";
import type { ViewStore } from "./ports.js";

export const maxViewsPerCall = 100;

export interface ViewService {
  /** Counts one view per id (repeats count again); unknown ids are skipped. Answers how many were counted. */
  record(postIds: readonly bigint[]): Promise<number>;
  /** Sends what waits to Redis now. */
  flush(): Promise<void>;
  /** Stops the timer and flushes what waits. */
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
   * Posts held at most while Redis refuses flushes: past it, views of posts not
   * already waiting are refused (the error says so) rather than growing memory.
   */
  readonly maxWaitingPosts?: number;
  /** Told when a flush failed; its views wait for the next one. */
  readonly onFlushFailure?: (error: unknown) => void;
  /** Told when views are given up: a flush Redis refused for longer than its receipt lasts. */
  readonly onViewsLost?: (views: number, error: unknown) => void;
  /** How long a failed flush is retried under its id, in milliseconds: under the minute its receipt lasts in Redis. */
  readonly retryForMs?: number;
}

/** Posts loaded back into Redis at once by one flush: each rebuild holds a PostgreSQL connection. */
const rebuildsAtOnce = 8;

export class ViewsNotLoadedError extends Error {
  override readonly name = "ViewsNotLoadedError";
  constructor(target: Target) {
    super(`Post ${target.id} kept leaving Redis right after being loaded; its views wait for the next flush.`);
  }
}

const backlogged = (waiting: number) =>
  new DomainError(ErrorCode.SERVICE_UNAVAILABLE, `Views of ${waiting} posts wait for Redis, which does not take them: retry shortly.`);

export function createViewService(options: ViewServiceOptions): ViewService {
  const { store, catalog, counters } = options;
  const flushEveryMs = options.flushEveryMs ?? 1_000;
  const flushAtPosts = options.flushAtPosts ?? 1_000;
  const maxWaitingPosts = options.maxWaitingPosts ?? 100_000;
  const retryForMs = options.retryForMs ?? 50_000;
  const waiting = new Map<bigint, number>();
  /** Flushes that failed, per post: retried with the same id and count until Redis takes them, or for `retryForMs`. */
  const retrying = new Map<bigint, { count: number; flushId: string; since: number }>();
  const rebuildSlots = pLimit(rebuildsAtOnce);
  let flushing: Promise<void> | null = null;
  let closed = false;

  /** Adds views of one post in Redis, loading the post there first when it is not held. */
  async function addViews(target: Target, count: number, flushId: string): Promise<void> {
    let counted = await store.add(target, count, flushId);
    for (let round = 0; counted.kind === "unloaded"; round++) {
      if (round === rebuildRounds) throw new ViewsNotLoadedError(target);
      // A post that does not exist (checked when the views arrived, so deleted since) cannot be rebuilt: its views go.
      if (!(await rebuildSlots(() => counters.rebuild(target)))) return;
      counted = await store.add(target, count, flushId);
    }
  }

  async function flushOnce(): Promise<void> {
    if (waiting.size === 0 && retrying.size === 0) return;
    // A post with a flush to retry sends only that one: its newer views wait, so one post never has two flushes in doubt.
    const again = [...retrying].map(([id, r]) => ({ id, ...r }));
    retrying.clear();
    const retried = new Set(again.map((r) => r.id));
    const now = Date.now();
    const fresh = [...waiting].flatMap(([id, count]) => (retried.has(id) ? [] : [{ id, count, flushId: randomUUID(), since: now }]));
    for (const { id } of fresh) waiting.delete(id);
    await Promise.all(
      [...again, ...fresh].map(({ id, count, flushId, since }) =>
        addViews({ type: "post", id }, count, flushId).catch((error: unknown) => {
          if (Date.now() - since < retryForMs) retrying.set(id, { count, flushId, since });
          else options.onViewsLost?.(count, error);
          options.onFlushFailure?.(error);
        }),
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
      if (closed) throw new DomainError(ErrorCode.SERVICE_UNAVAILABLE, "This process is shutting down and takes no more views; retry shortly.");
      if (postIds.length > maxViewsPerCall) {
        throw badInput("postIds", `recordViews takes at most ${maxViewsPerCall} ids; got ${postIds.length}. Split the call.`);
      }
      timer ??= setInterval(() => void flush(), flushEveryMs).unref();
      const rows = await catalog.posts(postIds);
      const found = rows.flatMap((row) => (row ? [row.id] : []));
      // All or nothing: a call refused for the backlog counts none of its views, so its retry counts them once.
      const newPosts = new Set(found.filter((id) => !waiting.has(id)));
      if (newPosts.size > 0 && waiting.size + retrying.size + newPosts.size > maxWaitingPosts) throw backlogged(waiting.size + retrying.size);
      for (const id of found) waiting.set(id, (waiting.get(id) ?? 0) + 1);
      const counted = found.length;
      if (waiting.size >= flushAtPosts) void flush();
      return counted;
    },
    flush,
    async close() {
      closed = true;
      if (timer) clearInterval(timer);
      await flushing;
      await flush();
    },
  };
}
