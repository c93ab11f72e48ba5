// Per-client budgets: how much each user, address and username may ask for in a
// period, spent before the work they pay for runs. The budgets live in a shared
// store (Redis) so every API process draws on the same ones.
import { RateLimitedError } from "../errors.js";
import type { RateBudgetStore } from "./ports.js";

/** The budgets there are, and whose each is. */
export const budgetNames = ["userMutations", "ipMutations", "ipSignIns", "usernameLogins", "viewerQueryCost", "ipQueryCost"] as const;
export type BudgetName = (typeof budgetNames)[number];

/** What a caller hears it ran out of. */
const whatEachCounts: Record<BudgetName, string> = {
  userMutations: "mutations from this user",
  ipMutations: "mutations from this address",
  ipSignIns: "sign-ins and registrations from this address",
  usernameLogins: "sign-in attempts for this username",
  viewerQueryCost: "expensive queries from this user",
  ipQueryCost: "expensive queries from this address",
};

export interface RateLimitSettings {
  /** Off: nothing is charged or refused. */
  readonly enabled: boolean;
  /** Units each budget holds and refills per `periodMs`; 0 leaves that budget unlimited. */
  readonly limits: Readonly<Record<BudgetName, number>>;
  readonly periodMs: number;
  /** Queries cheaper than this are not charged to the query-cost budgets. */
  readonly queryCostThreshold: number;
}

export interface Charge {
  readonly budget: BudgetName;
  /** Whose budget: a user id, a client address, a username. */
  readonly subject: string;
  /** Units to spend, at least 1. */
  readonly cost: number;
}

export interface RateLimits {
  /** Queries cheaper than this spend no budget: only expensive ones are charged (their whole cost). */
  readonly queryCostThreshold: number;
  /**
   * Spends every charge, or throws RateLimitedError (RATE_LIMITED) with the
   * longest wait among the budgets that are spent. Charges go to independent keys
   * (each its own slot in a cluster), so those accepted stay spent when another
   * is refused: a refused caller loses at most one request's worth.
   */
  charge(charges: readonly Charge[]): Promise<void>;
}

export interface RateLimitOptions {
  readonly store: RateBudgetStore;
  readonly settings: RateLimitSettings;
  /** Told when the store failed and the charges were let through. */
  readonly onStoreFailure?: (error: unknown) => void;
  /** After a failure, how long charges skip the store; default 1 s. */
  readonly retryStoreAfterMs?: number;
}

/**
 * Fails open: when the store does not answer, requests go through uncharged and
 * the store is left alone for `retryStoreAfterMs`. Budgets protect capacity; a
 * Redis outage already fails likes (they need Redis) and refusing reads and
 * sign-ins too would turn a partial outage into a full one. Scrypt stays bounded
 * by identity.ts's limit on concurrent password work whatever the budgets say.
 */
export function createRateLimits(options: RateLimitOptions): RateLimits {
  const { store, settings, onStoreFailure, retryStoreAfterMs = 1000 } = options;
  let storeSkippedUntil = 0;
  return {
    queryCostThreshold: settings.queryCostThreshold,
    async charge(charges) {
      if (!settings.enabled || Date.now() < storeSkippedUntil) return;
      const priced = charges.filter((c) => settings.limits[c.budget] > 0 && c.cost > 0);
      if (priced.length === 0) return;
      let waits: number[];
      try {
        waits = await Promise.all(
          priced.map(({ budget, subject, cost }) => {
            const limit = settings.limits[budget];
            // A cost above the whole budget could never be accepted: it spends all of it instead.
            return store.charge(budget, subject, Math.min(Math.ceil(cost), limit), limit, settings.periodMs);
          }),
        );
      } catch (error) {
        storeSkippedUntil = Date.now() + retryStoreAfterMs;
        onStoreFailure?.(error);
        return;
      }
      let worst = -1;
      for (let i = 0; i < waits.length; i++) if ((waits[i] ?? 0) > (waits[worst] ?? 0)) worst = i;
      if (worst >= 0) {
        const { budget } = priced[worst] as Charge;
        throw new RateLimitedError(Math.max(1, Math.ceil((waits[worst] as number) / 1000)), whatEachCounts[budget]);
      }
    },
  };
}
