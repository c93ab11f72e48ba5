import type { Logger } from "pino";

export interface Shutdown {
  /**
   * Registers something to close, named in the log should it not finish in time;
   * everything closes in reverse order of registration.
   */
  add(name: string, close: () => Promise<void>): void;
}

export interface ShutdownOptions {
  /**
   * How long the closes together may wait for stores to answer, in milliseconds.
   * A close still waiting then (on a stalled Redis, say) is left behind and the
   * next one starts; the clients close last, so what was left waiting on them fails then.
   */
  readonly graceMs?: number;
  /** How long each close may take once the grace is spent, in milliseconds. */
  readonly overdueCloseMs?: number;
  /** After this long the process exits 1 whatever is still closing; under the supervisor's bound (supervisor.ts). */
  readonly stopTimeoutMs?: number;
}

/** The defaults: every process of `npm start` gone within 10 s of SIGTERM, whatever the stores do. */
export const shutdownDefaults = { graceMs: 5_000, overdueCloseMs: 1_500, stopTimeoutMs: 9_000 } as const;

const left = Symbol("left behind");

/**
 * Listens for SIGTERM and SIGINT from the start, so a signal during start-up
 * closes what has opened so far, and for the loss of the supervisor that started
 * the process.
 *
 * Exits 0 when every close finished or was left behind waiting for a store:
 * nothing a close waits on is lost by leaving it, since the stores keep what was
 * not finished (the outbox keeps entries not yet acknowledged, RabbitMQ redelivers
 * messages not acknowledged); only views waiting in memory, at most one flush
 * interval's worth, are lost, as a crash would lose them, and logged. Exits 1
 * when a close failed or closing outlasted `stopTimeoutMs`.
 */
export function onTermination(logger: Logger, options: ShutdownOptions = {}): Shutdown {
  const { graceMs, overdueCloseMs, stopTimeoutMs } = { ...shutdownDefaults, ...options };
  const closers: { name: string; close: () => Promise<void> }[] = [];
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    logger.info({ signal }, "shutting down");
    // A close that hangs past every bound (a library that ignores its connection closing) must not keep the process alive.
    setTimeout(() => {
      logger.error(`still closing after ${stopTimeoutMs} ms; exiting`);
      process.exit(1);
    }, stopTimeoutMs).unref();
    const graceEndsAt = Date.now() + graceMs;
    void (async () => {
      let failed = false;
      for (const { name, close } of closers.reverse()) {
        const allowedMs = Math.max(graceEndsAt - Date.now(), overdueCloseMs);
        let timer: NodeJS.Timeout | undefined;
        const outcome = await Promise.race([
          close().then(
            () => null,
            (err: unknown) => ({ err }),
          ),
          new Promise<typeof left>((resolve) => (timer = setTimeout(() => resolve(left), allowedMs))),
        ]);
        clearTimeout(timer);
        if (outcome === left)
          logger.warn(
            { closing: name, waitedMs: allowedMs },
            `${name} did not close in ${allowedMs} ms (a store does not answer); left behind, the stores keep what it had not finished`,
          );
        else if (outcome) {
          failed = true;
          logger.error({ err: outcome.err, closing: name }, `${name} failed to close`);
        }
      }
      return failed;
    })().then((failed) => {
      logger.info(failed ? "stopped, not cleanly" : "stopped");
      process.exit(failed ? 1 : 0);
    });
  };
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
  // The pipeline process of `npm start`: when its supervisor is gone (killed, say), nothing else would
  // stop it. (API processes are node:cluster workers, which Node itself ends on that disconnect.)
  if (process.send) process.once("disconnect", () => shutdown("supervisor gone"));
  return { add: (name, close) => closers.push({ name, close }) };
}
