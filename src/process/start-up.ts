// How an entry point starts: the configuration read or refused, stores waited
// for while they cannot be reached, and a start that failed ended in one way.
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { loadConfig, type Config } from "../config.js";
import { createLogger } from "./logger.js";
import { refusalExitCode, StartRefusal } from "./refusal.js";
import type { Shutdown } from "./shutdown.js";
import { backoffMs } from "../domain/backoff.js";

/**
 * Ends a process whose start failed. A refusal (the configuration, or what it points
 * at, must change) is one log line saying what to change, and exit code 78, which
 * the supervisor does not restart; anything else is logged with its stack, exit 1.
 */
export function exitAfterFailedStart(logger: Logger, error: unknown): never {
  if (error instanceof StartRefusal) {
    logger.fatal({ exitCode: refusalExitCode }, `refusing to start: ${error.message}`);
    process.exit(refusalExitCode);
  }
  logger.fatal({ err: error }, "could not start");
  process.exit(1);
}

/** The configuration; an invalid one ends the process as a refusal, logged under `role`. */
export function loadConfigOrRefuse(role: string): Config {
  try {
    return loadConfig();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    exitAfterFailedStart(createLogger("info", role), new StartRefusal(`${message}\nChange the environment and start again.`));
  }
}

export interface KeepTryingOptions {
  readonly logger: Logger;
  /** What is being waited for, in the log line of each failed attempt. */
  readonly what: string;
  /** Stops waiting (shutting down): the pending wait rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /** The first wait after a failure, in milliseconds; it doubles up to `maxDelayMs`. */
  readonly firstDelayMs?: number;
  /**
   * The longest wait between attempts, in milliseconds: how late, at most, a process
   * notices that a store is back (plus one attempt).
   */
  readonly maxDelayMs?: number;
  /** Called after each failed attempt, with its error. */
  readonly onFailure?: (error: unknown) => void;
}

/**
 * Runs `attempt` until it succeeds, waiting between attempts with a capped
 * exponential backoff (and jitter, so processes started together do not knock
 * together). A refusal is not retried: nothing changes by trying again.
 */
export async function keepTrying<T>(attempt: (signal: AbortSignal) => Promise<T>, options: KeepTryingOptions): Promise<T> {
  const firstDelayMs = options.firstDelayMs ?? 250;
  const maxDelayMs = options.maxDelayMs ?? 2_000;
  const signal = options.signal ?? new AbortController().signal;
  for (let failures = 0; ; failures++) {
    signal.throwIfAborted();
    try {
      return await attempt(signal);
    } catch (error) {
      if (error instanceof StartRefusal || signal.aborted) throw error;
      options.onFailure?.(error);
      const delayMs = backoffMs(failures, { firstMs: firstDelayMs, maxMs: maxDelayMs, jitter: 0.25 });
      options.logger.warn({ err: error, attempt: failures + 1, retryInMs: delayMs }, `${options.what} failed; trying again in ${delayMs} ms`);
      await sleep(delayMs, undefined, { signal });
    }
  }
}

/**
 * How long one attempt to open the clients may take: a store that takes
 * connections but answers nothing (stalled) fails the attempt, and the next starts afresh.
 */
const openAttemptMs = 10_000;

export interface PatientOpenOptions {
  /** Stops waiting (shutting down). */
  readonly signal: AbortSignal;
  /** Called after each failed attempt, with its error: the process is waiting for a store. */
  readonly onWaiting?: (error: unknown) => void;
}

/**
 * Opens what `open` opens (the store clients), waiting with backoff for as long as
 * a store cannot be reached, so a process started during an outage serves once it
 * ends; refusals are thrown. Each attempt gets a signal that aborts at its deadline.
 */
export function openPatiently<T>(open: (signal: AbortSignal) => Promise<T>, logger: Logger, options: PatientOpenOptions): Promise<T> {
  return keepTrying((signal) => open(AbortSignal.any([signal, AbortSignal.timeout(openAttemptMs)])), {
    logger,
    what: "reaching the stores",
    signal: options.signal,
    ...(options.onWaiting && { onFailure: options.onWaiting }),
  });
}

/**
 * Runs an entry point's start. A shutdown during it cancels the wait for the
 * stores (`start` gets the signal) and ends the process itself; any other
 * failure ends it as exitAfterFailedStart says.
 */
export async function runStart(logger: Logger, shutdown: Shutdown, start: (waiting: AbortSignal) => Promise<void>): Promise<void> {
  const waiting = new AbortController();
  shutdown.add("waiting for the stores", async () => waiting.abort(new Error("shutting down")));
  try {
    await start(waiting.signal);
  } catch (error) {
    if (!waiting.signal.aborted) exitAfterFailedStart(logger, error);
  }
}
