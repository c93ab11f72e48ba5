// The Prometheus side of the deployment example, for scripts/lint-deploy.ts: the alert rules and
// their unit tests through promtool, and every query of the Grafana dashboard checked as PromQL
// the same way. promtool is Debian's prometheus package; without it nothing here is checked.
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { stringify } from "yaml";

/** Records a finding at a line of a file. */
export type Report = (file: string, line: number, message: string) => void;

export interface PrometheusFiles {
  /** Alert rules, for `promtool check rules`. */
  readonly alerts: string;
  /** Their unit tests, for `promtool test rules`. */
  readonly alertTests: string;
  /** A Grafana dashboard whose queries must be PromQL. */
  readonly dashboard: string;
}

/** promtool's lines once each: `test rules` repeats a rule file's error per test group. */
const distinctLines = (text: string) => [...new Set(text.split("\n").map((line) => line.trim()))].filter((line) => line !== "").join("\n");

/** Runs promtool; null when it is not installed, otherwise whether it passed and what it said. */
async function promtool(...args: string[]): Promise<{ ok: boolean; output: string } | null> {
  try {
    const { stdout, stderr } = await promisify(execFile)("promtool", args);
    return { ok: true, output: stdout + stderr };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    const { stdout = "", stderr = "", message } = error as { stdout?: string; stderr?: string; message: string };
    return { ok: false, output: distinctLines(stdout + stderr) || message };
  }
}

/** The dashboard's queries as recording rules, Grafana's interval variables given a value, so promtool parses them as PromQL. */
async function dashboardQueriesAsRules(dashboardPath: string): Promise<string> {
  const dashboard = JSON.parse(await readFile(dashboardPath, "utf8")) as { panels?: { id?: number; targets?: { refId?: string; expr?: string }[] }[] };
  const rules = (dashboard.panels ?? []).flatMap((panel) =>
    (panel.targets ?? []).map((target) => ({
      record: `dashboard_panel_${panel.id ?? "without_id"}_${target.refId ?? "without_ref"}`,
      expr: (target.expr ?? "").replace(/\$__(rate_interval|interval|range)\b/g, "5m"),
    })),
  );
  return stringify({ groups: [{ name: "dashboard", rules }] });
}

/** Whether promtool was there to check them. */
export async function lintPrometheus({ alerts, alertTests, dashboard }: PrometheusFiles, report: Report): Promise<boolean> {
  const version = await promtool("--version");
  if (!version) {
    console.error("promtool is not on PATH (Debian: apt-get install prometheus): the alert rules and the dashboard's queries are not checked");
    return false;
  }
  const checked = await promtool("check", "rules", alerts);
  if (!checked?.ok) report(alerts, 1, `promtool check rules: ${checked?.output ?? ""}`);
  const tested = await promtool("test", "rules", alertTests);
  if (!tested?.ok) report(alertTests, 1, `promtool test rules: ${tested?.output ?? ""}`);
  const dir = await mkdtemp(path.join(tmpdir(), "likes-dashboard-"));
  try {
    const queries = path.join(dir, "dashboard-queries.yaml");
    await writeFile(queries, await dashboardQueriesAsRules(dashboard));
    const parsed = await promtool("check", "rules", queries);
    if (!parsed?.ok) report(dashboard, 1, `a query is not PromQL (records named by panel id and refId): ${parsed?.output ?? ""}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return true;
}
