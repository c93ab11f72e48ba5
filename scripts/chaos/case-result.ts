// What a case of the fault suite found, and whether that fails it.
import type { Verdict } from "./check.js";
import type { Figure } from "./figures.js";
import type { Settling } from "./settle.js";
import type { ViewsVerdict } from "./views-check.js";

export interface CaseResult {
  readonly name: string;
  readonly summary: string;
  readonly skipped: string | null;
  /** Set when the case could not run to its check (a process would not start…). */
  readonly error: string | null;
  readonly expectsLoss: string | null;
  readonly attempted: number;
  readonly acknowledged: number;
  readonly verdict: Verdict | null;
  /** The hot post's views against the viewers' reports. */
  readonly views: ViewsVerdict | null;
  readonly settling: Settling | null;
  readonly failures: ReadonlyMap<string, number>;
  readonly maxLatencyMs: number;
  /** What the case measured beyond the check, some held to targets. */
  readonly figures: readonly Figure[];
  readonly timeline: readonly string[];
  readonly directory: string;
  readonly seconds: number;
}

/** The case's figures whose target it missed. */
export const missedTargets = (result: CaseResult): Figure[] => result.figures.filter((f) => f.target && !f.target.met);

/** Whether the case broke a guarantee (its expected loss aside) or missed a target. */
export function failed(result: CaseResult): boolean {
  if (result.skipped) return false;
  if (result.error || !result.verdict || !result.settling?.settled) return true;
  if (missedTargets(result).length > 0) return true;
  const v = result.verdict;
  const unexpectedLost = v.lost.length - (result.expectsLoss ? v.expectedLost : 0);
  const unexpectedMisanswered = v.misanswered.length - (result.expectsLoss ? v.expectedMisanswered : 0);
  const views = result.views;
  const viewsWrong = !views || views.lost > views.allowedLost || views.doubled > 0 || views.drift !== null;
  return unexpectedLost > 0 || v.doubledCount > 0 || v.drift.length > 0 || unexpectedMisanswered > 0 || result.settling.deadLettered > 0 || viewsWrong;
}
