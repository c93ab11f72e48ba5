import { hostname } from "node:os";
import { pino, type Logger } from "pino";

/** A JSON logger whose lines say which process wrote them: `name` (its role), `pid`, and any `fields`. */
export function createLogger(level: string, name: string, fields: Record<string, unknown> = {}): Logger {
  return pino({ name, level, base: { pid: process.pid, hostname: hostname(), ...fields } });
}
