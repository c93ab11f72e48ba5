// What a case measures beyond lost and doubled changes: named figures, some held
// to a target of the issue they come from. A missed target fails the case as a
// lost change does; a figure without a target is context for the reader.
import type { LatencySample } from "./load.js";

export interface Figure {
  readonly name: string;
  /** The measured value as printed, with its unit. */
  readonly value: string;
  readonly target?: {
    /** The target as printed, such as "≤ 5". */
    readonly text: string;
    readonly met: boolean;
  };
}

/** The `p`th percentile (0–100) of `values`, nearest rank; NaN when there are none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

export const ms = (value: number) => (Number.isNaN(value) ? "n/a" : value >= 10_000 ? `${(value / 1000).toFixed(1)} s` : `${Math.round(value)} ms`);

/** Latencies and errors of the samples due within [fromMs, toMs). */
export function window(samples: readonly LatencySample[], fromMs: number, toMs: number) {
  const inside = samples.filter((s) => s.atMs >= fromMs && s.atMs < toMs);
  const errors = new Map<string, number>();
  for (const s of inside) if (s.error !== null) errors.set(s.error, (errors.get(s.error) ?? 0) + 1);
  const latencies = inside.map((s) => s.ms);
  return {
    count: inside.length,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    errors,
    errorCount: inside.length - inside.filter((s) => s.error === null).length,
  };
}

/** "SERVICE_UNAVAILABLE×3, fetch failed×1", or "none". */
export const countsText = (counts: ReadonlyMap<string, number>) => [...counts].map(([k, n]) => `${k}×${n}`).join(", ") || "none";
