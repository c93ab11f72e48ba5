// What opening the clients shares: what it has opened so far, to close in the
// reverse order of opening, each client within a bound.
import type { Logger } from "pino";
import type { Config } from "../config.js";

/**
 * How long one client may take to close politely (QUIT, a broker's close) before
 * its connection is dropped: a store that answers nothing would otherwise hold the
 * close for as long as it stalls, and the relay's connection has no command timeout.
 */
const politeCloseMs = 500;

/** Runs `polite`; when it has not closed within `politeCloseMs`, runs `force` (if the client has one) and stops waiting. */
export async function closeWithin(polite: () => Promise<unknown>, force: () => void): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), politeCloseMs)));
  const outcome = await Promise.race([
    polite().then(
      () => "closed" as const,
      () => "failed" as const,
    ),
    late,
  ]);
  clearTimeout(timer);
  if (outcome !== "closed") force();
}

/**
 * The closes of what opening opened, run in the reverse order of opening: the broker, then Redis, then
 * PostgreSQL. Redis's connections close together: they need no order among them, and under a stall
 * each waits its full bound.
 */
export class Closers {
  /** What closes first, one at a time and last opened first: the broker's connection, then the index fence. */
  readonly first: (() => Promise<void>)[] = [];
  readonly redis: (() => Promise<void>)[] = [];
  database: (() => Promise<void>) | null = null;

  async close(): Promise<void> {
    for (const closeOne of this.first.splice(0).reverse()) await closeOne();
    await Promise.all(this.redis.splice(0).map((closeOne) => closeOne()));
    const database = this.database;
    this.database = null;
    await database?.();
  }
}

/** What every step of opening takes: an abort of `signal` fails the step, and what it opens goes to `closers`. */
export interface Opening {
  readonly config: Config;
  readonly logger: Logger;
  readonly signal: AbortSignal | undefined;
  readonly closers: Closers;
}
