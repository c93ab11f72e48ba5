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
import pLimit, { type LimitFunction } from "p-limit";
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

/** The views this process holds, from their arrival until Redis takes them or they are given up, and their flush. */
class HeldViews {
  lastSeq = 0;
  readonly waiting = new Map<bigint, number>();
  /** Flushes that failed, per post: retried as they were until Redis takes them, or for `retryForMs`. */
  readonly retrying = new Map<bigint, PostFlush>();
  /** Posts in the flush under way: held too, though in neither map. */
  inFlight = 0;
  flushing: Promise<void> | null = null;
  closed = false;
  /** When shutdown stops sending: a send not started by then fails at once, and its views are reported lost. */
  stopSendingAt = Number.POSITIVE_INFINITY;
  // Started by the first view, so a process that records none (a worker, a reconcile) runs no timer.
  timer: NodeJS.Timeout | null = null;
}

/** What every function below takes: the service's options with their defaults, and the views it holds. */
interface Views {
  readonly options: ViewServiceOptions;
  readonly flushEveryMs: number;
  readonly flushAtPosts: number;
  readonly maxWaitingPosts: number;
  readonly retryForMs: number;
  readonly closeWithinMs: number;
  readonly sender: string;
  readonly rebuildSlots: LimitFunction;
  readonly held: HeldViews;
}

/** Adds one post's views in Redis, loading the post there first when it is not held. */
async function send({ options, retryForMs, sender, rebuildSlots }: Views, { id, count, seq, since }: PostFlush): Promise<void> {
  const target: Target = { type: "post", id };
  const flush: ViewFlush = { sender, seq };
  // Checked before every send, a retry's included: a send past the deadline could run after Redis forgot the number.
  const add = () => {
    if (Date.now() - since >= retryForMs) throw new ViewsGivenUpError(`Redis refused them for ${retryForMs / 1000} s`);
    return options.store.add(target, count, flush);
  };
  let counted = await add();
  for (let round = 0; counted.kind === "unloaded"; round++) {
    if (round === rebuildRounds) throw new ViewsNotLoadedError(target);
    // A post that does not exist (checked when the views arrived, so deleted since) cannot be rebuilt: its views go.
    if (!(await rebuildSlots(() => options.counters.rebuild(target)))) return;
    counted = await add();
  }
}

async function flushOnce(views: Views): Promise<void> {
  const { options, retryForMs, held } = views;
  if (held.waiting.size === 0 && held.retrying.size === 0) return;
  // A post with a flush to retry sends only that one: its newer views wait, so one post never has two flushes in doubt.
  const again = [...held.retrying.values()];
  held.retrying.clear();
  const retried = new Set(again.map((r) => r.id));
  const seq = ++held.lastSeq;
  const now = Date.now();
  const fresh = [...held.waiting].flatMap(([id, count]) => (retried.has(id) ? [] : [{ id, count, seq, since: now }]));
  for (const { id } of fresh) held.waiting.delete(id);
  const batch = [...again, ...fresh];
  held.inFlight = batch.length;
  const sendSlots = pLimit(sendsAtOnce);
  const sendInTime = (flush: PostFlush) =>
    Date.now() < held.stopSendingAt ? send(views, flush) : Promise.reject(new ViewsGivenUpError("the process shut down before they were sent"));
  await Promise.all(
    batch.map((flush) =>
      sendSlots(() => sendInTime(flush))
        .catch((error: unknown) => {
          if (Date.now() - flush.since < retryForMs) held.retrying.set(flush.id, flush);
          else options.onViewsLost?.(flush.count, error);
          options.onFlushFailure?.(error);
        })
        .finally(() => held.inFlight--),
    ),
  );
}

function flush(views: Views): Promise<void> {
  const { held } = views;
  held.flushing ??= flushOnce(views).finally(() => (held.flushing = null));
  return held.flushing;
}

async function record(views: Views, postIds: readonly bigint[]): Promise<number> {
  const { held } = views;
  if (held.closed) throw shuttingDown();
  if (postIds.length > maxViewsPerCall) {
    throw badInput("postIds", `recordViews takes at most ${maxViewsPerCall} ids; got ${postIds.length}. Split the call.`);
  }
  held.timer ??= setInterval(() => void flush(views), views.flushEveryMs).unref();
  const rows = await views.options.catalog.posts(postIds);
  // Shutdown may have flushed for the last time while the posts were looked up: nothing is added yet, so refusing is safe.
  if (held.closed) throw shuttingDown();
  const found = rows.flatMap((row) => (row ? [row.id] : []));
  // All or nothing: a call refused for the backlog counts none of its views, so its retry counts them once.
  const heldPosts = held.waiting.size + held.retrying.size + held.inFlight;
  const newPosts = new Set(found.filter((id) => !held.waiting.has(id)));
  if (newPosts.size > 0 && heldPosts + newPosts.size > views.maxWaitingPosts) throw backlogged(heldPosts);
  for (const id of found) held.waiting.set(id, (held.waiting.get(id) ?? 0) + 1);
  if (held.waiting.size >= views.flushAtPosts) void flush(views);
  return found.length;
}

async function close(views: Views): Promise<void> {
  const { held } = views;
  held.closed = true;
  if (held.timer) clearInterval(held.timer);
  held.stopSendingAt = Date.now() + views.closeWithinMs;
  await held.flushing;
  // A retried post's newer views go in the flush after the retry's, so one flush is not always enough.
  while ((held.waiting.size > 0 || held.retrying.size > 0) && Date.now() < held.stopSendingAt) {
    await flush(views);
    if (held.retrying.size > 0) await sleep(100);
  }
  const left = [...held.waiting.values(), ...[...held.retrying.values()].map((r) => r.count)].reduce((a, b) => a + b, 0);
  if (left > 0) views.options.onViewsLost?.(left, new ViewsGivenUpError("the process shut down before Redis took them"));
  held.waiting.clear();
  held.retrying.clear();
}

export function createViewService(options: ViewServiceOptions): ViewService {
  const views: Views = {
    options,
    flushEveryMs: options.flushEveryMs ?? 1_000,
    flushAtPosts: options.flushAtPosts ?? 1_000,
    maxWaitingPosts: options.maxWaitingPosts ?? 100_000,
    retryForMs: options.retryForMs ?? 60_000,
    closeWithinMs: options.closeWithinMs ?? 5_000,
    sender: randomUUID(),
    rebuildSlots: pLimit(rebuildsAtOnce),
    held: new HeldViews(),
  };
  return {
    record: (postIds) => record(views, postIds),
    flush: () => flush(views),
    close: () => close(views),
  };
}
