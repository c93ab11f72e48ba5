// Rate budgets decided in this process's memory, so charging them costs no Redis
// call on the request path, and shared with the other API processes off it.
//
// Each (budget, subject) holds one number, as scripts/charge-budget.lua does: the
// theoretical arrival time (GCRA), here on this process's monotonic clock. A
// budget of `limit` units per period refills one unit each period / limit, holds
// at most `limit`, and a charge it cannot take whole is refused with the wait
// until it could.
//
// Sharing: once the units a subject spent here and did not report reach
// reportThreshold(limit), they are added to the subject's state in Redis
// (scripts/report-spending.lua), batched with every other report due in the same
// turn of the event loop, fire and forget. Redis answers how far the budget is
// spent now, everyone's reports included, and the local state is raised to at
// least that (never lowered: it already holds this process's own units). A
// failed report is told and dropped (it may have been applied); while reports
// fail each process decides alone, on its own spending.
//
// The bound: a process learns what the others spent only when it reports, so
// each process may let through up to about one threshold of a subject's units
// the others already spent, plus what it lets through while its report is in
// flight. A subject can spend at most about
//     limit + processes × threshold   per period
// (with the default threshold of a tenth of the limit and 4 API processes,
// 1.4 × limit), against exactly `limit` when every charge was a Redis call.
// Memory is bounded by `maxSubjects` per process (least recently charged
// forgotten first); forgetting a subject loses only its unreported units, fewer
// than one threshold, and its state comes back from Redis at its next report.
import { LRUCache } from "lru-cache";
import type { BudgetSpending } from "./ports/index.js";

/** A charge this process decides: `cost` is 1 to `limit` units. */
export interface LocalCharge<Budget extends string = string> {
  readonly budget: Budget;
  readonly subject: string;
  readonly cost: number;
  readonly limit: number;
}

export interface LocalRefusal<Budget extends string = string> {
  /** The refused charge with the longest wait. */
  readonly charge: LocalCharge<Budget>;
  /** Milliseconds until the same charges would be accepted, at least 1. */
  readonly waitMs: number;
  /** Milliseconds until the refused charge's budget is full again. */
  readonly aheadMs: number;
}

export interface LocalBudgets<Budget extends string = string> {
  /**
   * Spends every charge, or none: answers null when spent, else the refusal with
   * the longest wait. One charge per (budget, subject) in a call.
   */
  charge(charges: readonly LocalCharge<Budget>[]): LocalRefusal<Budget> | null;
  /** Milliseconds until a subject's budget is full again, as this process knows it; 0 when it holds none of it. */
  aheadMs(budget: Budget, subject: string): number;
}

export interface LocalBudgetOptions {
  /** Every budget refills its whole limit over this many milliseconds. */
  readonly periodMs: number;
  /** Subjects held at most, across budgets. */
  readonly maxSubjects: number;
  /** Adds spendings to the shared budgets; answers per spending the ms its budget is spent ahead of now. */
  readonly report: (spendings: readonly BudgetSpending[]) => Promise<readonly number[]>;
  /** Told when a report failed; its units are dropped. */
  readonly onReportFailure?: (error: unknown) => void;
  /** After a failed report, how long no report is sent (units wait unreported); default 1 s. */
  readonly retryReportsAfterMs?: number;
  /** A monotonic clock in milliseconds; performance.now() by default. */
  readonly nowMs?: () => number;
}

/** Units a subject spends in one process before the process reports them: a tenth of its limit, at least 1. */
export function reportThreshold(limit: number): number {
  return Math.max(1, Math.ceil(limit / 10));
}

interface SubjectState {
  readonly budget: string;
  readonly subject: string;
  /** The budget's limit when last charged (a setting: the same for every charge of a budget). */
  limit: number;
  /** The theoretical arrival time, in µs of the local clock: when the budget would be full again. */
  arrivalMicros: number;
  /** Units spent here and not reported yet. */
  unreported: number;
  /** A report of this subject is queued or in flight: the next waits for its answer. */
  reporting: boolean;
}

/** Refill time per unit in microseconds, at least 1, as the Redis store rounds it. */
export const intervalMicros = (periodMs: number, limit: number) => Math.max(1, Math.round((periodMs * 1000) / limit));

export function createLocalBudgets<Budget extends string>(options: LocalBudgetOptions): LocalBudgets<Budget> {
  const { periodMs, report, onReportFailure, retryReportsAfterMs = 1000 } = options;
  const nowMs = options.nowMs ?? (() => performance.now());
  const nowMicros = () => Math.round(nowMs() * 1000);
  const states = new LRUCache<string, SubjectState>({ max: options.maxSubjects });
  const due = new Set<string>();
  let reportsSkippedUntilMs = Number.NEGATIVE_INFINITY;

  const keyOf = (budget: string, subject: string) => `${budget}\u0000${subject}`;

  function queueReport(key: string, state: SubjectState): void {
    if (state.reporting || state.unreported < reportThreshold(state.limit) || nowMs() < reportsSkippedUntilMs) return;
    state.reporting = true;
    if (due.size === 0) setImmediate(flush);
    due.add(key);
  }

  function flush(): void {
    const batch = [...due].flatMap((key) => {
      const state = states.peek(key);
      return state ? [{ key, state, units: state.unreported }] : [];
    });
    due.clear();
    if (batch.length === 0) return;
    for (const entry of batch) entry.state.unreported = 0;
    const spendings = batch.map(({ state, units }) => ({ budget: state.budget, subject: state.subject, units, limit: state.limit, periodMs }));
    // Answered in a later turn whatever `report` does, so a report that throws is a failure told, never a crash.
    Promise.resolve(spendings)
      .then(report)
      .then(
        (aheadMs) => {
          const now = nowMicros();
          batch.forEach(({ key, state }, i) => {
            state.reporting = false;
            state.arrivalMicros = Math.max(state.arrivalMicros, now + Math.round((aheadMs[i] ?? 0) * 1000));
            // Units spent while the report was away may be due themselves.
            if (states.peek(key) === state) queueReport(key, state);
          });
        },
        (error: unknown) => {
          for (const { state } of batch) state.reporting = false;
          reportsSkippedUntilMs = nowMs() + retryReportsAfterMs;
          onReportFailure?.(error);
        },
      );
  }

  return {
    charge(charges) {
      const now = nowMicros();
      let refusal: LocalRefusal<Budget> | null = null;
      const accepted: { charge: LocalCharge<Budget>; key: string; arrivalMicros: number }[] = [];
      for (const charge of charges) {
        const key = keyOf(charge.budget, charge.subject);
        const interval = intervalMicros(periodMs, charge.limit);
        const arrival = Math.max(states.get(key)?.arrivalMicros ?? now, now);
        const next = arrival + charge.cost * interval;
        const waitMicros = next - charge.limit * interval - now;
        if (waitMicros > 0) {
          const waitMs = Math.max(1, Math.ceil(waitMicros / 1000));
          if (!refusal || waitMs > refusal.waitMs) refusal = { charge, waitMs, aheadMs: (arrival - now) / 1000 };
        } else {
          accepted.push({ charge, key, arrivalMicros: next });
        }
      }
      if (refusal) return refusal;
      for (const { charge, key, arrivalMicros } of accepted) {
        let state = states.get(key);
        if (!state) {
          state = { budget: charge.budget, subject: charge.subject, limit: charge.limit, arrivalMicros, unreported: 0, reporting: false };
          states.set(key, state);
        }
        state.limit = charge.limit;
        state.arrivalMicros = arrivalMicros;
        state.unreported += charge.cost;
        queueReport(key, state);
      }
      return null;
    },
    aheadMs(budget, subject) {
      const state = states.peek(keyOf(budget, subject));
      return state ? Math.max(0, state.arrivalMicros - nowMicros()) / 1000 : 0;
    },
  };
}
