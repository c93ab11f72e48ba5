// Rate budgets shared by every API process.

/** Units a process let through on a budget decided in its memory, not yet told to the other processes. */
export interface BudgetSpending {
  readonly budget: string;
  readonly subject: string;
  /** At least 1. */
  readonly units: number;
  /** Units the budget holds, refilled evenly over `periodMs`. */
  readonly limit: number;
  readonly periodMs: number;
}

/** Rate budgets kept where every API process shares them (src/domain/rate-limits.ts spends them). */
export interface RateBudgetStore {
  /**
   * Charges `cost` units against `subject`'s budget named `budget`, which holds
   * `limit` units and refills them evenly over `periodMs`; `cost` is 1 to `limit`.
   * Answers a `waitMs` of 0 when charged, else the milliseconds until the same
   * charge would be accepted (nothing charged); and in both cases `aheadMs`, how
   * long until the budget is full again.
   */
  charge(budget: string, subject: string, cost: number, limit: number, periodMs: number): Promise<{ readonly waitMs: number; readonly aheadMs: number }>;
  /**
   * Adds spendings to the shared budgets whatever they hold (the units were let
   * through already), in one round trip per node. Answers, per spending, how far
   * its budget is spent now: the milliseconds until it is full again, 0 to
   * `periodMs`. Rejects when any did not answer.
   */
  report(spendings: readonly BudgetSpending[]): Promise<number[]>;
}
