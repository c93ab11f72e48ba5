// Per-client budgets: how much each user, address and username may ask for in a
// period, spent before the work they pay for runs. Every API process draws on
// the same budgets: those decided in the shared store (Redis) exactly, those
// decided in process memory within the bound local-budgets.ts states.
import { RateLimitedError } from "../errors.js";
import type { ColdLoad } from "./counters.js";
import { createLocalBudgets, intervalMicros } from "./local-budgets.js";
import type { RateBudgetStore, Reachability } from "./ports/index.js";
import { tooLate, within } from "./within.js";

/** The budgets there are, and whose each is. */
export const budgetNames = ["userMutations", "ipMutations", "ipSignIns", "usernameLogins", "viewerQueryCost", "ipQueryCost"] as const;
export type BudgetName = (typeof budgetNames)[number];

interface BudgetTraits {
  /** What a caller hears it ran out of. */
  readonly counts: string;
  /**
   * Where a charge is decided. "process": in memory, shared through Redis off the
   * request path (local-budgets.ts), so it costs no Redis call: the mutation
   * budgets, charged on every like, whose budget allows no round trip but the
   * like's own scripts (DESIGN §3c). "store": by a Redis call before the work
   * runs, exact across processes: sign-ins guard passwords, where a few extra
   * guesses per process matter, and expensive queries are rare and cost far more
   * than a call.
   */
  readonly decidedIn: "process" | "store";
}

export const budgets: Readonly<Record<BudgetName, BudgetTraits>> = {
  userMutations: { counts: "mutations from this user", decidedIn: "process" },
  ipMutations: { counts: "mutations from this address", decidedIn: "process" },
  ipSignIns: { counts: "sign-ins and registrations from this address", decidedIn: "store" },
  usernameLogins: { counts: "sign-in attempts for this username", decidedIn: "store" },
  viewerQueryCost: { counts: "expensive queries from this user", decidedIn: "store" },
  ipQueryCost: { counts: "expensive queries from this address", decidedIn: "store" },
};

/**
 * What a read pays per target it reads from PostgreSQL because Redis does not hold
 * it, in query-cost units (about the objects a query resolves), whatever the query's
 * own cost: a warm post with its counts costs 2 and is read from Redis in microseconds,
 * while a cold one costs its share of a PostgreSQL statement for the page's counts (and
 * one for the viewer's memberships). So a crawl of cold posts spends the address's
 * budget (RATE_LIMIT_IP_QUERY_COST a minute: 50,000 cold posts), and a signed-in
 * viewer's too, well before it can load the database; feeds of loaded posts pay nothing
 * more. Loading them into Redis afterwards is the warmer's, at its own bounded rate.
 */
export const coldLoadCost: Readonly<Record<ColdLoad, number>> = { counts: 10 };

/** The charges of loading `targets` cold targets, to the address's and the viewer's query-cost budgets. */
export function coldLoadCharges(load: ColdLoad, targets: number, address: string, userId: bigint | null): Charge[] {
  const cost = coldLoadCost[load] * targets;
  if (cost <= 0) return [];
  const charges: Charge[] = [{ budget: "ipQueryCost", subject: address, cost }];
  if (userId !== null) charges.push({ budget: "viewerQueryCost", subject: userId.toString(), cost });
  return charges;
}

export interface RateLimitSettings {
  /** Off: nothing is charged or refused. */
  readonly enabled: boolean;
  /** Units each budget holds and refills per `periodMs`; 0 leaves that budget unlimited. */
  readonly limits: Readonly<Record<BudgetName, number>>;
  readonly periodMs: number;
  /** Queries cheaper than this are not charged to the query-cost budgets. */
  readonly queryCostThreshold: number;
  /** Subjects of the budgets decided in process memory held at most per process. */
  readonly localSubjects: number;
}

export interface Charge {
  readonly budget: BudgetName;
  /** Whose budget: a user id, a client address, a username. */
  readonly subject: string;
  /** Units to spend, at least 1. */
  readonly cost: number;
}

/** Where a budget stands after a charge: what a client reads in the RateLimit-* response headers. */
export interface BudgetStanding {
  /** Units the budget holds when full. */
  readonly limit: number;
  /** Units left now. */
  readonly remaining: number;
  /** Whole seconds until the budget is full again. */
  readonly resetSeconds: number;
}

/**
 * The standing of a budget of `limit` units a period that is spent `aheadMs` ahead of now
 * (GCRA): a unit not yet refilled, even in part, is not left, in the whole microseconds of
 * the interval a charge is decided with (a charge of the units told is accepted).
 */
export function standingOf(limit: number, aheadMs: number, periodMs: number): BudgetStanding {
  const spent = Math.ceil(Math.round(aheadMs * 1000) / intervalMicros(periodMs, limit));
  return { limit, remaining: Math.max(0, limit - spent), resetSeconds: Math.ceil(aheadMs / 1000) };
}

/** What one request was charged so far: the budget with the fewest units left. */
export interface ChargedBudgets {
  standing: BudgetStanding | null;
}

/** The tighter of two standings: fewer units left. */
export const tighter = (a: BudgetStanding | null, b: BudgetStanding | null): BudgetStanding | null => (!a ? b : !b || a.remaining <= b.remaining ? a : b);

export interface RateLimits {
  /** Queries cheaper than this spend no budget: only expensive ones are charged (their whole cost). */
  readonly queryCostThreshold: number;
  /**
   * Spends every charge, or throws RateLimitedError (RATE_LIMITED) with the
   * longest wait among the budgets that are spent. The budgets decided in
   * process memory are decided first, all or none; the store's then go to
   * independent keys (each its own slot in a cluster), so those accepted stay
   * spent when another is refused: a refused caller loses at most one request's
   * worth. Answers the standing of the charged budget with the fewest units left
   * (null when nothing was charged); a budget decided in memory stands as this
   * process knows it. A charge waits for the store until `waitUntilMs` (milliseconds
   * since the epoch) at most, then is decided in process memory.
   */
  charge(charges: readonly Charge[], waitUntilMs?: number): Promise<BudgetStanding | null>;
}

export interface RateLimitOptions {
  readonly store: RateBudgetStore;
  readonly settings: RateLimitSettings;
  /**
   * Told when the store failed: during a charge (the charges were let through)
   * or a report of what this process spent (dropped; each process decides alone
   * meanwhile).
   */
  readonly onStoreFailure?: (error: unknown, during: "charge" | "report") => void;
  /** After a failure, how long charges and reports skip the store; default 1 s. */
  readonly retryStoreAfterMs?: number;
  /** How long a charge waits for the store before it is decided in process memory instead; default 300 ms. */
  readonly storeWaitMs?: number;
  /** Whether Redis answers: while it does not, the store's budgets are decided in process memory without asking it. */
  readonly reachability?: Reachability;
  /** The monotonic clock of the budgets decided in memory, in milliseconds; performance.now() by default. */
  readonly nowMs?: () => number;
}

/** A charge with its budget's limit; the cost at most the limit. */
interface PricedCharge extends Charge {
  readonly limit: number;
}

/**
 * Degrades to process memory: when the store does not answer (out of reach, or
 * slower than `storeWaitMs`), its budgets are decided in this process's memory
 * instead, each process on its own, and the store is left alone for
 * `retryStoreAfterMs` after a failure. Budgets protect capacity; a Redis outage
 * already refuses likes (they need Redis), and refusing reads and sign-ins too
 * would turn a partial outage into a full one, while letting them all through
 * would leave passwords unguarded. Scrypt stays bounded by identity.ts's limit on
 * concurrent password work whatever the budgets say.
 */
export function createRateLimits(options: RateLimitOptions): RateLimits {
  const { store, settings, onStoreFailure, retryStoreAfterMs = 1000, storeWaitMs = 300, reachability } = options;
  const local = createLocalBudgets<BudgetName>({
    periodMs: settings.periodMs,
    maxSubjects: settings.localSubjects,
    report: (spendings) => store.report(spendings),
    onReportFailure: (error) => onStoreFailure?.(error, "report"),
    retryReportsAfterMs: retryStoreAfterMs,
    ...(options.nowMs && { nowMs: options.nowMs }),
  });
  // The store's budgets as this process alone sees them, for while the store cannot decide: nothing shared.
  const fallback = createLocalBudgets<BudgetName>({
    periodMs: settings.periodMs,
    maxSubjects: settings.localSubjects,
    report: async (spendings) => spendings.map(() => 0),
    ...(options.nowMs && { nowMs: options.nowMs }),
  });
  let storeSkippedUntil = 0;

  function chargeInMemory(charges: readonly PricedCharge[], budgets: typeof local): BudgetStanding | null {
    const refused = budgets.charge(charges);
    if (refused) throw refusal(refused.charge, refused);
    let standing: BudgetStanding | null = null;
    for (const { budget, subject, limit } of charges) standing = tighter(standing, standingOf(limit, budgets.aheadMs(budget, subject), settings.periodMs));
    return standing;
  }

  async function chargeStore(charges: readonly PricedCharge[], waitUntilMs: number | undefined): Promise<BudgetStanding | null> {
    if (charges.length === 0) return null;
    const waitMs = Math.min(storeWaitMs, (waitUntilMs ?? Number.POSITIVE_INFINITY) - Date.now());
    if (Date.now() < storeSkippedUntil || (reachability && !reachability.reachable()) || waitMs <= 0) return chargeInMemory(charges, fallback);
    let answers: { readonly waitMs: number; readonly aheadMs: number }[];
    const asked = Promise.all(charges.map(({ budget, subject, cost, limit }) => store.charge(budget, subject, cost, limit, settings.periodMs)));
    try {
      const answered = await within(asked, waitMs);
      if (answered === tooLate) {
        asked.catch((error: unknown) => reachability?.failed(error));
        return chargeInMemory(charges, fallback);
      }
      answers = answered;
    } catch (error) {
      reachability?.failed(error);
      storeSkippedUntil = Date.now() + retryStoreAfterMs;
      onStoreFailure?.(error, "charge");
      return chargeInMemory(charges, fallback);
    }
    let worst = -1;
    let standing: BudgetStanding | null = null;
    for (let i = 0; i < answers.length; i++) {
      const { waitMs, aheadMs } = answers[i] as (typeof answers)[number];
      if (waitMs > (answers[worst]?.waitMs ?? 0)) worst = i;
      standing = tighter(standing, standingOf((charges[i] as PricedCharge).limit, aheadMs, settings.periodMs));
    }
    const refused = charges[worst];
    if (refused) throw refusal(refused, answers[worst] as { waitMs: number; aheadMs: number });
    return standing;
  }

  return {
    queryCostThreshold: settings.queryCostThreshold,
    async charge(charges, waitUntilMs) {
      if (!settings.enabled) return null;
      const priced = charges.flatMap(({ budget, subject, cost }): PricedCharge[] => {
        const limit = settings.limits[budget];
        // A cost above the whole budget could never be accepted: it spends all of it instead.
        return limit > 0 && cost > 0 ? [{ budget, subject, cost: Math.min(Math.ceil(cost), limit), limit }] : [];
      });
      if (priced.length === 0) return null;
      const standing = chargeInMemory(
        priced.filter((c) => budgets[c.budget].decidedIn === "process"),
        local,
      );
      return tighter(
        standing,
        await chargeStore(
          priced.filter((c) => budgets[c.budget].decidedIn === "store"),
          waitUntilMs,
        ),
      );
    },
  };
}

const refusal = (
  { budget, limit }: { readonly budget: BudgetName; readonly limit: number },
  { waitMs, aheadMs }: { readonly waitMs: number; readonly aheadMs: number },
) => new RateLimitedError(Math.max(1, Math.ceil(waitMs / 1000)), budgets[budget].counts, { limit, resetSeconds: Math.ceil(aheadMs / 1000) });
