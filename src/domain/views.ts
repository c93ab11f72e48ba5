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
// views that arrive meanwhile wait for a flush of their own.
import { randomUUID } from "node:crypto";
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
}

const backlogged = (waiting: number) =>
  new DomainError(ErrorCode.SERVICE_UNAVAILABLE, `Views of ${waiting} posts wait for Redis, which does not take them: retry shortly.`);

export function createViewService(options: ViewServiceOptions): ViewService {
  const { store, catalog, counters } = options;
  const flushEveryMs = options.flushEveryMs ?? 1_000;
  const flushAtPosts = options.flushAtPosts ?? 1_000;
  const maxWaitingPosts = options.maxWaitingPosts ?? 100_000;
  const waiting = new Map<bigint, number>();
  /** Flushes that failed, per post: retried with the same id and count until Redis takes them. */
  const retrying = new Map<bigint, { count: number; flushId: string }>();
  let flushing: Promise<void> | null = null;
  let closed = false;

  /** Adds views of one post in Redis, loading the post there first when it is not held. */
  async function addViews(target: Target, count: number, flushId: string): Promise<void> {
    let counted = await store.add(target, count, flushId);
    for (let round = 0; counted.kind === "unloaded"; round++) {
      // A post that does not exist (checked when the views arrived) cannot be rebuilt: its views go.
      if (round === rebuildRounds || !(await counters.rebuild(target))) return;
      counted = await store.add(target, count, flushId);
    }
  }

  async function flushOnce(): Promise<void> {
    if (waiting.size === 0 && retrying.size === 0) return;
    // A post with a flush to retry sends only that one: its newer views wait, so one post never has two flushes in doubt.
    const again = [...retrying].map(([id, r]) => ({ id, ...r }));
    retrying.clear();
    const retried = new Set(again.map((r) => r.id));
    const fresh = [...waiting].flatMap(([id, count]) => (retried.has(id) ? [] : [{ id, count, flushId: randomUUID() }]));
    for (const { id } of fresh) waiting.delete(id);
    await Promise.all(
      [...again, ...fresh].map(({ id, count, flushId }) =>
        addViews({ type: "post", id }, count, flushId).catch((error: unknown) => {
          retrying.set(id, { count, flushId });
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
      if (closed) throw new Error("The view service is closed.");
      if (postIds.length > maxViewsPerCall) {
        throw badInput("postIds", `recordViews takes at most ${maxViewsPerCall} ids; got ${postIds.length}. Split the call.`);
      }
      timer ??= setInterval(() => void flush(), flushEveryMs).unref();
      const rows = await catalog.posts(postIds);
      let counted = 0;
      for (const row of rows) {
        if (!row) continue;
        if (!waiting.has(row.id) && waiting.size + retrying.size >= maxWaitingPosts) throw backlogged(waiting.size + retrying.size);
        waiting.set(row.id, (waiting.get(row.id) ?? 0) + 1);
        counted++;
      }
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
