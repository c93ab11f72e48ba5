// The composition root's fixed settings: bounds the design sets, which no operator
// tunes (those are in config.ts), gathered where they can be read together.

/** How stale a count kept in memory may be served: DESIGN's bound on hot counts. */
export const hotCountsMaxStalenessMs = 100;

/** How long a readiness report answers every probe of a process. */
export const readinessShareMs = 1_000;

/** How long a reading of the outbox's length serves the readiness reports. */
export const outboxSampleMs = 5_000;

/** How long the reconcile schedule's claim of a tick is kept: a day, far longer than two workers' clocks differ. */
export const reconcileTickClaimMs = 86_400_000;

/** The period the rate budgets are counted over. */
export const rateBudgetPeriodMs = 60_000;
