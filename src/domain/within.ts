// Waiting for a store no longer than the caller can.

/** What `within` answers when the promise has not settled in time. */
export const tooLate = Symbol("tooLate");

/**
 * The promise's value, or `tooLate` when it has not settled within `ms`; it goes on
 * unheard then (a caller that still wants its error catches the promise itself).
 */
export function within<T>(promise: Promise<T>, ms: number): Promise<T | typeof tooLate> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(tooLate), Math.max(0, ms));
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
