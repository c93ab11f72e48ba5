import type { Logger } from "pino";

export interface Shutdown {
  /** Registers something to close; everything closes in reverse order of registration. */
  add(close: () => Promise<void>): void;
}

/**
 * Listens for SIGTERM and SIGINT from the start, so a signal during start-up
 * closes what has opened so far, and for the loss of the supervisor that started
 * the process. Exits 0 when everything closed, 1 when not.
 */
export function onTermination(logger: Logger): Shutdown {
  const closers: (() => Promise<void>)[] = [];
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    logger.info({ signal }, "shutting down");
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
  // Started by `npm start`'s supervisor: when it is gone (killed, say), nothing would stop this process.
  if (process.send) process.once("disconnect", () => shutdown("supervisor gone"));
  return { add: (close) => closers.push(close) };
}
