// What a case may lose, read off its timeline: the views an API process held
// when it was killed or lost Redis, and the changes a Redis crash took.
import type { ChaosCase } from "./case.js";
import type { ViewsAllowance } from "./views-check.js";

/**
 * Which views the case may lose. An API process held the views answered since its
 * last flush, which came at most a flush interval (1 s) before the kill; another
 * half second covers a flush under way when it was killed. A process that cannot
 * reach Redis holds what it answered since its last flush before it lost Redis.
 */
export function viewsAllowance(c: ChaosCase, timeline: readonly string[]): ViewsAllowance {
  if (c.viewsMayBeLost === "any") return { kind: "any" };
  const steps = c.viewsMayBeLost;
  if (typeof steps === "object") {
    const at = (what: string) => Number.parseFloat(timeline.find((l) => l.includes(what)) ?? "NaN") * 1000;
    const from = at(steps.from);
    const to = at(steps.to);
    return Number.isNaN(from) || Number.isNaN(to) ? { kind: "none" } : { kind: "flushWindow", killMs: to, windowMs: to - from + 1_500 };
  }
  if (c.viewsMayBeLost !== "flushWindow") return { kind: "none" };
  const line = timeline.find((l) => l.includes("API kill -9"));
  return line ? { kind: "flushWindow", killMs: Number.parseFloat(line) * 1000, windowMs: 1_500 } : { kind: "none" };
}

/** From the crash of the case's Redis to its being back, as the timeline noted them (ms into the load). */
export function lossWindow(timeline: readonly string[]): { crashMs: number; backMs: number } {
  const at = (what: string) => {
    const line = timeline.find((l) => l.includes(what));
    return line ? Number.parseFloat(line) * 1000 : Number.POSITIVE_INFINITY;
  };
  return { crashMs: at("Redis kill -9"), backMs: at("Redis started again") };
}
