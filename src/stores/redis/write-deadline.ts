// A write to Redis either applies before its caller answers, or never. Each write
// script carries a deadline on Redis's clock (scripts/includes/deadline.lua) and
// changes nothing past it; the caller answers a failure only once the deadline
// has passed, so a write held in a network or re-sent on a new connection cannot
// apply after the user heard it failed, and undo what they did since.
import { Cluster } from "ioredis";
import type { RedisClient } from "./client.js";

/**
 * How far Redis's clock may lag this process's. A write's deadline is set this
 * much before the moment the caller may answer its failure: a write Redis runs by
 * its own clock before the deadline then ran, by this process's clock, before the
 * answer. Processes and Redis on one host share a clock; NTP keeps hosts within
 * a few milliseconds.
 */
export const clockSkewAllowanceMs = 100;

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
 * The deadline of a write sent now that its caller waits `timeoutMs` for. The
 * timeout must exceed the skew allowance; half of it is the least the write gets.
 */
export function writeDeadline(timeoutMs: number, now = Date.now()): WriteDeadline {
  return deadlineOf(now + timeoutMs, now + timeoutMs - Math.min(clockSkewAllowanceMs, timeoutMs / 2));
}

/**
 * The deadline of a write whose caller answers at `answerAtMs` whatever happens
 * (the request's deadline). The whole skew allowance is kept: a write sent too
 * late to get it runs past its deadline and changes nothing.
 */
export function writeDeadlineBy(answerAtMs: number): WriteDeadline {
  return deadlineOf(answerAtMs, answerAtMs - clockSkewAllowanceMs);
}

function deadlineOf(answerAt: number, atMs: number): WriteDeadline {
  return {
    atMs: Math.floor(atMs),
    settled: async () => {
      const wait = answerAt - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    },
  };
}

/**
 * How far Redis's clock runs ahead of this process's (negative: behind), from one
 * TIME sent at `sentMs` and answered at `answeredMs`: Redis read its clock about
 * halfway, so the estimate is off by at most half the round trip.
 */
export function clockSkewMs(sentMs: number, redisTime: readonly (string | number)[], answeredMs: number): number {
  const redisMs = Number(redisTime[0]) * 1000 + Number(redisTime[1]) / 1000;
  return redisMs - (sentMs + answeredMs) / 2;
}

/** Measures the skew once; a warning when write deadlines' allowance would not cover it. */
export async function checkClockSkew(redis: { time(): Promise<(string | number)[]> }, warn: (skewMs: number) => void): Promise<number> {
  const sent = Date.now();
  const time = await redis.time();
  const skew = clockSkewMs(sent, time, Date.now());
  if (Math.abs(skew) > clockSkewAllowanceMs) warn(skew);
  return skew;
}
