// The suite's table and, below it, the evidence of every case that failed.
import { failed, missedTargets, type CaseResult } from "./case-result.js";

function verdictOf(r: CaseResult): string {
  if (r.skipped) return `skipped: ${r.skipped}`;
  if (r.error) return "ERROR (see below)";
  if (!r.settling?.settled) return "FAIL: did not settle";
  const v = r.verdict;
  if (!v) return "ERROR";
  const beyond = r.expectsLoss ? v.lost.length - v.expectedLost : v.lost.length;
  const wrong = r.expectsLoss ? v.misanswered.length - v.expectedMisanswered : v.misanswered.length;
  if (failed(r)) {
    const reasons = [
      beyond > 0 ? (r.expectsLoss ? `${beyond} lost beyond the ${v.expectedLost} expected` : "lost") : "",
      v.doubledCount > 0 ? "doubled" : "",
      v.drift.length > 0 ? "drift" : "",
      wrong > 0 ? (r.expectsLoss ? `${wrong} misanswered beyond the ${v.expectedMisanswered} expected` : "misanswered") : "",
      (r.settling?.deadLettered ?? 0) > 0 ? "dead-lettered" : "",
      r.views && r.views.lost > r.views.allowedLost ? `${r.views.lost - r.views.allowedLost} views lost` : "",
      r.views && r.views.doubled > 0 ? "views doubled" : "",
      r.views?.drift ? "views drift" : "",
      ...missedTargets(r).map((f) => `missed ${f.name}`),
    ].filter(Boolean);
    return `FAIL: ${reasons.join(", ")}`;
  }
  if (r.expectsLoss) return v.lost.length > 0 ? `${r.expectsLoss}: lost ${v.lost.length}, as expected` : `${r.expectsLoss} (lost none this time)`;
  return "ok";
}

export function formatTable(results: readonly CaseResult[]): string {
  const header = ["case", "attempted", "acknowledged", "unknown", "lost", "doubled", "drift", "misanswered", "views acked", "views lost", "verdict"];
  const rows = results.map((r) => {
    const v = r.verdict;
    const cell = (n: number | undefined) => (r.skipped || v === null || n === undefined ? "-" : String(n));
    return [
      r.name + (r.expectsLoss ? " *" : ""),
      r.skipped ? "-" : String(r.attempted),
      r.skipped ? "-" : String(r.acknowledged),
      cell(v?.unknown),
      cell(v?.lost.length),
      cell(v?.doubledCount),
      cell(v?.drift.length),
      cell(v?.misanswered.length),
      r.views ? String(r.views.acknowledged) : "-",
      r.views ? `${r.views.lost}${r.views.allowedLost > 0 ? ` (≤ ${r.views.allowedLost})` : ""}` : "-",
      verdictOf(r),
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] as string).length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i > 0 && i < cells.length - 1 ? c.padStart(widths[i] as number) : c.padEnd(widths[i] as number)))
      .join(" | ")
      .trimEnd();
  const legend = [
    "",
    "unknown: pairs (user, post) whose last request had no answer, so either state is accepted;",
    "lost: pairs whose last acknowledged state Redis or PostgreSQL does not hold (or the stores disagree on);",
    "doubled: counts counted twice (a member in two shards, a counter above the members or rows it counts);",
    "drift: counters that disagree (count vs members, Redis vs PostgreSQL, likesReceived vs the author's posts, the API vs PostgreSQL);",
    "misanswered: acknowledged answers whose `changed` contradicts the state known before them;",
    "views acked, views lost: views of the hot post answered counted, and those it does not hold (in brackets, how many the case may lose:",
    "  what a killed API process held since its last flush); views counted twice or Redis and PostgreSQL apart fail the case.",
    ...(results.some((r) => r.expectsLoss) ? ["*: Redis keeps nothing on disk; losing likes acknowledged before its crash is expected, and reported."] : []),
  ];
  return [line(header), widths.map((w) => "-".repeat(w)).join("-|-"), ...rows.map(line), ...legend, ...formatFigures(results)].join("\n");
}

/** The figures cases measured beyond the check, against their targets; nothing when no case has any. */
function formatFigures(results: readonly CaseResult[]): string[] {
  const header = ["case", "figure", "value", "target", "met"];
  const rows = results.flatMap((r) => r.figures.map((f) => [r.name, f.name, f.value, f.target?.text ?? "", f.target ? (f.target.met ? "yes" : "NO") : ""]));
  if (rows.length === 0) return [];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] as string).length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] as number))
      .join(" | ")
      .trimEnd();
  return ["", "Figures (a target missed fails its case):", "", line(header), widths.map((w) => "-".repeat(w)).join("-|-"), ...rows.map(line)];
}

const first = (items: readonly string[], n = 5) => [
  ...items.slice(0, n).map((i) => `    ${i}`),
  ...(items.length > n ? [`    … ${items.length - n} more`] : []),
];

export function formatEvidence(results: readonly CaseResult[]): string {
  const out: string[] = [];
  for (const r of results) {
    if (r.skipped) continue;
    const interesting = failed(r) || (r.verdict?.lost.length ?? 0) > 0;
    out.push(`\n${r.name} (${r.seconds.toFixed(0)} s): ${r.summary}`);
    out.push(`  requests: ${r.attempted}, longest ${r.maxLatencyMs} ms; failures: ${[...r.failures].map(([k, n]) => `${k}×${n}`).join(", ") || "none"}`);
    if (r.settling)
      out.push(
        `  settled: ${r.settling.settled ? `yes, in ${r.settling.seconds.toFixed(1)} s` : `NO after ${r.settling.seconds.toFixed(1)} s (${r.settling.left})`}; dead-lettered: ${r.settling.deadLettered}`,
      );
    if (r.views) {
      const w = r.views;
      out.push(
        `  views: ${w.acknowledged} acknowledged, ${w.unanswered} unanswered, ${w.counted} counted, lost ${w.lost} (${w.allowedLost} allowed), doubled ${w.doubled}${w.drift ? `, ${w.drift}` : ""}`,
      );
    }
    for (const f of r.figures) out.push(`  ${f.name}: ${f.value}${f.target ? ` (target ${f.target.text}: ${f.target.met ? "met" : "MISSED"})` : ""}`);
    out.push(`  timeline: ${r.timeline.join("; ")}`);
    if (r.error) out.push(`  error: ${r.error}`);
    const v = r.verdict;
    if (v && interesting) {
      if (v.lost.length) out.push(`  lost:`, ...first(v.lost));
      if (v.doubled.length) out.push(`  doubled:`, ...first(v.doubled));
      if (v.drift.length) out.push(`  drift:`, ...first(v.drift));
      if (v.misanswered.length) out.push(`  misanswered:`, ...first(v.misanswered));
    }
    if (interesting) out.push(`  logs and every finding: ${r.directory}`);
  }
  return out.join("\n");
}
