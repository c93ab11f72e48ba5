import { createRequire } from "node:module";
import { hostname } from "node:os";
import { pino, type DestinationStream, type Logger } from "pino";

export interface LoggerOptions {
  /** Lines for people, through pino-pretty, when standard output is a terminal (development); JSON lines otherwise. */
  readonly pretty?: boolean;
}

/**
 * pino-pretty's stream, loaded only for a terminal: production never loads it. Written
 * synchronously, so that lines of a process that exits at once are not lost.
 */
function prettyStream(): DestinationStream {
  const build = createRequire(import.meta.url)("pino-pretty") as typeof import("pino-pretty");
  return build({ sync: true, colorize: true, translateTime: "SYS:HH:MM:ss.l", ignore: "hostname" });
}

/** A JSON logger whose lines say which process wrote them: `name` (its role), `pid`, and any `fields`. */
export function createLogger(level: string, name: string, fields: Record<string, unknown> = {}, options: LoggerOptions = {}): Logger {
  const settings = { name, level, base: { pid: process.pid, hostname: hostname(), ...fields } };
  return options.pretty && process.stdout.isTTY ? pino(settings, prettyStream()) : pino(settings);
}
