// What one request's reads may spend on targets Redis does not hold: they wait for
// a load no longer than the request's deadline, and pay for each load from the
// caller's query-cost budgets before it starts (domain/rate-limits.ts, coldLoadCost).
import type { ColdReads } from "../domain/counters.js";
import type { Viewer } from "../domain/identity.js";
import { coldLoadCharges, tighter, type ChargedBudgets } from "../domain/rate-limits.js";
import type { Services } from "../domain/services.js";
import { addressSubject } from "./client-address.js";

/** `deadline` tells the request's deadline when asked (a content mutation's is set once its operation is known). */
export function coldReadsOf(
  services: Pick<Services, "rateLimits">,
  viewer: Viewer | null,
  clientIp: string,
  charged: ChargedBudgets,
  deadline: () => number | undefined = () => undefined,
): ColdReads {
  return {
    get deadlineAtMs() {
      return deadline();
    },
    pay: async (load, targets, waitUntilMs) => {
      charged.standing = tighter(
        charged.standing,
        await services.rateLimits.charge(coldLoadCharges(load, targets, addressSubject(clientIp), viewer?.userId ?? null), waitUntilMs),
      );
    },
  };
}
