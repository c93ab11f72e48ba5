// A write to Redis either applies before its caller answers, or never. Each write
// script carries a deadline on Redis's clock (scripts/includes/deadline.lua) and
// changes nothing past it; the caller answers a failure only once the deadline
// has passed, so a write held in a network or re-sent on a new connection cannot
// apply after the user heard it failed, and undo what they did since. The
// deadline is translated to Redis's clock by what this process measured of it
// (redis-clock.ts).
import { Cluster } from "ioredis";
import type { RedisClient } from "./client.js";
import type { RedisClock } from "./redis-clock.js";

/** The wait a write's deadline is set within when the client has no command timeout. */
export const defaultWriteTimeoutMs = 1_000;

/** How long the client waits for a command: a write without a caller's deadline gets its own within it. */
export function commandTimeoutOf(redis: RedisClient): number {
  return (redis instanceof Cluster ? redis.options.redisOptions?.commandTimeout : redis.options.commandTimeout) ?? defaultWriteTimeoutMs;
}

/** `call`'s reply; its failure only once the deadline has passed, when it can no longer apply. */
export async function settledOnFailure<T>(deadline: WriteDeadline, call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (error) {
    await deadline.settled();
    throw error;
  }
}

/** A write that ran after its deadline: it changed nothing, and never will. */
export class WriteDeadlinePassedError extends Error {
  override readonly name = "WriteDeadlinePassedError";
  constructor(script: string) {
    super(`${script} ran after its deadline and changed nothing.`);
  }
}

export interface WriteDeadline {
  /** The deadline to pass the script: milliseconds since the epoch, on Redis's clock. */
  readonly atMs: number;
  /** Resolves once a failure of the write may be answered: the write can no longer apply. */
  settled(): Promise<void>;
}

/**
 * The deadline of a write sent now that its caller waits `timeoutMs` for, its
 * failure answered at the end of that wait.
 */
export function writeDeadline(timeoutMs: number, clock: RedisClock, now = Date.now()): WriteDeadline {
  return writeDeadlineBy(now + timeoutMs, clock);
}

/**
 * The deadline of a write whose caller answers at `answerAtMs` whatever happens
 * (the request's deadline): the earliest Redis's clock may read then, less the
 * millisecond deadline.lua's whole-millisecond comparison may let pass. Throws,
 * naming the clock, when Redis's clock is not known well enough.
 */
export function writeDeadlineBy(answerAtMs: number, clock: RedisClock): WriteDeadline {
  const atMs = Math.floor(clock.deadlineFor(answerAtMs)) - 1;
  // The wait runs on the monotonic clock: a step of the wall clock meanwhile neither shortens nor lengthens it.
  const answerAtMonotonicMs = performance.now() + (answerAtMs - Date.now());
  return {
    atMs,
    settled: async () => {
      // A timer may fire a little early: waited again until the moment has passed.
      for (let wait = answerAtMonotonicMs - performance.now(); wait > 0; wait = answerAtMonotonicMs - performance.now())
        await new Promise((resolve) => setTimeout(resolve, Math.ceil(wait)));
    },
  };
}
