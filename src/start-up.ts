// How an entry point starts: the configuration read or refused, and a start
// that failed ended in one way.
import type { Logger } from "pino";
import { loadConfig, type Config } from "./config.js";
import { createLogger } from "./logger.js";
import { refusalExitCode, StartRefusal } from "./refusal.js";

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
