import type { Logger } from "pino";

export interface Shutdown {
  /** Registers something to close; everything closes in reverse order of registration. */
  add(close: () => Promise<void>): void;
}

/**
 * Listens for SIGTERM and SIGINT from the start, so a signal during start-up
 * closes what has opened so far, and for the loss of the supervisor that started
 * the process. Exits 0 when everything closed, 1 when not or when closing takes
 * longer than `stopTimeoutMs` (under the supervisor's 30 s before it kills).
 */
export function onTermination(logger: Logger, stopTimeoutMs = 25_000): Shutdown {
  const closers: (() => Promise<void>)[] = [];
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    logger.info({ signal }, "shutting down");
    // A close that hangs (a broker that never answers) must not keep the process alive for ever.
    setTimeout(() => {
      logger.error(`still closing after ${stopTimeoutMs} ms; exiting`);
      process.exit(1);
    }, stopTimeoutMs);
    (async () => {
      for (const close of closers.reverse()) await close();
    })().then(
      () => {
        logger.info("stopped");
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
  // The pipeline process of `npm start`: when its supervisor is gone (killed, say), nothing else would
  // stop it. (API processes are node:cluster workers, which Node itself ends on that disconnect.)
  if (process.send) process.once("disconnect", () => shutdown("supervisor gone"));
  return { add: (close) => closers.push(close) };
}
