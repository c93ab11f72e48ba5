// The Grafana dashboard and the Prometheus alert rules of deploy/, read for tests: their
// queries, the metric names those queries use, and whether a /metrics text serves them.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";

const root = fileURLToPath(new URL("../../", import.meta.url));
export const dashboardPath = "deploy/grafana/likes-dashboard.json";
export const alertsPath = "deploy/prometheus/alerts.yaml";

export interface DashboardTarget {
  readonly refId?: string;
  readonly expr?: string;
  readonly datasource?: { readonly type?: string; readonly uid?: string };
}

export interface DashboardPanel {
  readonly id?: number;
  readonly type?: string;
  readonly title?: string;
  readonly gridPos?: { readonly h?: number; readonly w?: number; readonly x?: number; readonly y?: number };
  readonly datasource?: { readonly type?: string; readonly uid?: string };
  readonly targets?: readonly DashboardTarget[];
}

export interface Dashboard {
  readonly uid?: string;
  readonly title?: string;
  readonly schemaVersion?: number;
  readonly templating?: { readonly list?: readonly { readonly name?: string; readonly type?: string; readonly query?: string }[] };
  readonly panels?: readonly DashboardPanel[];
}

export interface AlertRule {
  readonly alert?: string;
  readonly record?: string;
  readonly expr?: string;
  readonly for?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
}

export const readDashboard = (): Dashboard => JSON.parse(readFileSync(root + dashboardPath, "utf8")) as Dashboard;

export const readAlertRules = (): AlertRule[] =>
  ((parse(readFileSync(root + alertsPath, "utf8")) as { groups?: { rules?: AlertRule[] }[] }).groups ?? []).flatMap((group) => group.rules ?? []);

/** Every query of the dashboard and of the rules, with where it is written. */
export function deployedQueries(): { readonly where: string; readonly expr: string }[] {
  const panels = (readDashboard().panels ?? []).flatMap((panel) =>
    (panel.targets ?? []).map((target) => ({ where: `${dashboardPath}: panel "${panel.title}" ${target.refId}`, expr: target.expr ?? "" })),
  );
  const rules = readAlertRules().map((rule) => ({ where: `${alertsPath}: ${rule.alert ?? rule.record}`, expr: rule.expr ?? "" }));
  return [...panels, ...rules];
}

/** PromQL words that are not metric names: operators, modifiers, and the special numbers. */
const keywords = new Set(["and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "inf", "nan"]);

/**
 * The metric names a PromQL expression selects. String literals, Grafana's variables, label
 * matchers, ranges and subqueries, and the label lists of by/without/on/ignoring/group_*
 * are taken out first; what is left that is an identifier, not called as a function and not
 * a keyword, names a metric. Numbers and durations start with a digit and never match.
 */
export function metricNamesIn(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\$\{[^}]*\}|\$\w+/g, "5m")
    .replace(/\{[^}]*\}/g, " ")
    .replace(/\[[^\]]*\]/g, " ")
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/gi, " ");
  const names = [...stripped.matchAll(/(?<![\w:.])[A-Za-z_:][\w:]*(?![\w:])(?!\s*\()/g)].map((m) => m[0]);
  return [...new Set(names.filter((name) => !keywords.has(name.toLowerCase())))];
}

/** The metric families a /metrics text declares (`# TYPE name type`), by name. */
export function metricFamilies(text: string): Map<string, string> {
  return new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1] ?? "", m[2] ?? ""]));
}

/**
 * Whether `name` is a series of one of `families`: a counter's, gauge's or summary's own
 * name (a summary's carries its quantiles), a histogram's `_bucket`, or either's `_sum` or `_count`.
 */
export function isServed(name: string, families: ReadonlyMap<string, string>): boolean {
  const type = families.get(name);
  if (type !== undefined) return type !== "histogram";
  const suffix = /_(bucket|sum|count)$/.exec(name);
  if (!suffix) return false;
  const base = families.get(name.slice(0, -suffix[0].length));
  return base === "histogram" || (base === "summary" && suffix[1] !== "bucket");
}
