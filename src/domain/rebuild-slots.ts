// How many targets one process loads from PostgreSQL at once. A rebuild holds a
// PostgreSQL connection for a REPEATABLE READ snapshot and a few more statements;
// without a cap a read of 100 cold posts started 100 of them together, filled the
// pool and starved sign-ins and likes of connections. Reads, view flushes and
// writes of cold targets all wait here, each no longer than its caller can.
import { DomainError, ErrorCode } from "../errors.js";

export interface RebuildSlots {
  /**
   * Runs `load` once fewer than `atOnce` loads run. Refuses with SERVICE_UNAVAILABLE,
   * running nothing, when `maxWaiting` loads wait already or when `deadlineAtMs`
   * (milliseconds since the epoch) comes before a slot does.
   */
  run<T>(load: () => Promise<T>, deadlineAtMs: number): Promise<T>;
  /** Loads running now. */
  readonly running: number;
  /** Loads waiting for a slot now. */
  readonly waiting: number;
}

export interface RebuildSlotsOptions {
  /** Loads running at once, at least 1. */
  readonly atOnce: number;
  /** Loads waiting at most; more are refused at once. */
  readonly maxWaiting: number;
}

interface Waiter {
  readonly start: () => void;
  readonly refuse: (error: DomainError) => void;
  timer: NodeJS.Timeout | null;
}

const queueFull = (waiting: number) =>
  new DomainError(ErrorCode.SERVICE_UNAVAILABLE, `${waiting} targets already wait to be loaded from PostgreSQL in this process; retry shortly.`);

const outOfTime = () =>
  new DomainError(
    ErrorCode.SERVICE_UNAVAILABLE,
    "A target could not be loaded from PostgreSQL within the request's deadline (others were being loaded); retry shortly.",
  );

export function createRebuildSlots(options: RebuildSlotsOptions): RebuildSlots {
  const atOnce = Math.max(1, options.atOnce);
  const { maxWaiting } = options;
  let running = 0;
  // First come, first served; a waiter that runs out of time leaves from anywhere in it.
  const queue: Waiter[] = [];

  const release = () => {
    const next = queue.shift();
    if (!next) {
      running--;
      return;
    }
    if (next.timer) clearTimeout(next.timer);
    // The slot passes straight to the next waiter: `running` stays as it is.
    next.start();
  };

  return {
    run<T>(load: () => Promise<T>, deadlineAtMs: number): Promise<T> {
      const leftMs = deadlineAtMs - Date.now();
      if (leftMs <= 0) return Promise.reject(outOfTime());
      const go = () => {
        let loading: Promise<T>;
        try {
          loading = load();
        } catch (error) {
          loading = Promise.reject(error instanceof Error ? error : new Error(String(error)));
        }
        return loading.finally(release);
      };
      if (running < atOnce) {
        running++;
        return go();
      }
      if (queue.length >= maxWaiting) return Promise.reject(queueFull(queue.length));
      return new Promise<T>((resolve, reject) => {
        const waiter: Waiter = { start: () => void go().then(resolve, reject), refuse: reject, timer: null };
        waiter.timer = setTimeout(() => {
          const at = queue.indexOf(waiter);
          if (at >= 0) queue.splice(at, 1);
          waiter.refuse(outOfTime());
        }, leftMs);
        queue.push(waiter);
      });
    },
    get running() {
      return running;
    },
    get waiting() {
      return queue.length;
    },
  };
}
