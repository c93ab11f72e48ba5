// A case's findings.txt in its folder: figures, request failures, settling,
// the timeline and the check's evidence, for reading after the run.
import { writeFileSync } from "node:fs";
import path from "node:path";
import type { CaseResult } from "./case-result.js";

export function writeFindings(result: CaseResult): void {
  const v = result.verdict;
  const lines = [
    `${result.name}: ${result.summary}`,
    result.error ? `ERROR: ${result.error}` : "",
    ...result.figures.map((f) => `${f.name}: ${f.value}${f.target ? ` (target ${f.target.text}: ${f.target.met ? "met" : "MISSED"})` : ""}`),
    `attempted ${result.attempted}, acknowledged ${result.acknowledged}, longest request ${result.maxLatencyMs} ms`,
    `request failures: ${[...result.failures].map(([k, n]) => `${k}×${n}`).join(", ") || "none"}`,
    result.settling
      ? `settled: ${result.settling.settled} after ${result.settling.seconds.toFixed(1)} s ${result.settling.left}; dead-lettered ${result.settling.deadLettered}`
      : "",
    result.views
      ? `views of the hot post: ${result.views.acknowledged} acknowledged, ${result.views.unanswered} unanswered, ${result.views.counted} counted; lost ${result.views.lost} (${result.views.allowedLost} allowed), doubled ${result.views.doubled}${result.views.drift ? `; ${result.views.drift}` : ""}`
      : "",
    "",
    "timeline (s into the load):",
    ...result.timeline.map((t) => `  ${t}`),
    ...(v
      ? [
          "",
          `lost (${v.lost.length}${result.expectsLoss ? `, ${v.expectedLost} acknowledged before the crash` : ""}):`,
          ...v.lost.map((l) => `  ${l}`),
          `doubled (${v.doubledCount}):`,
          ...v.doubled.map((l) => `  ${l}`),
          `drift (${v.drift.length}):`,
          ...v.drift.map((l) => `  ${l}`),
          `misanswered (${v.misanswered.length}):`,
          ...v.misanswered.map((l) => `  ${l}`),
          `unknown pairs: ${v.unknown}`,
        ]
      : []),
  ];
  writeFileSync(path.join(result.directory, "findings.txt"), lines.filter((l, i) => l !== "" || i > 0).join("\n") + "\n");
}
