// The Grafana dashboard and the Prometheus alert rules of deploy/: the dashboard in the
// shape Grafana imports, each alert with a runbook line in docs/operations.md, and the
// reading of PromQL that test/integration/process/dashboard-metrics.test.ts relies on.
// Whether the rules parse and fire is promtool's part (npm run lint:deploy).
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { deployedQueries, isServed, metricFamilies, metricNamesIn, readAlertRules, readDashboard } from "../support/observability.js";

const operations = readFileSync(fileURLToPath(new URL("../../docs/operations.md", import.meta.url)), "utf8");

/** The headings under "## Dashboard and alerts", each as GitHub anchors it (lower case, punctuation dropped). */
function runbookAnchors(): Set<string> {
  const section = /^## Dashboard and alerts$([\s\S]*?)(?=^## )/m.exec(operations)?.[1] ?? "";
  return new Set(
    [...section.matchAll(/^#{3,6}\s+(.+)$/gm)].map((m) =>
      (m[1] ?? "")
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, "")
        .replace(/\s/g, "-"),
    ),
  );
}

/** A rectangle of the grid per panel, to find two that overlap. */
const cellsOf = (gridPos: { h?: number; w?: number; x?: number; y?: number }) => {
  const cells: string[] = [];
  for (let y = gridPos.y ?? 0; y < (gridPos.y ?? 0) + (gridPos.h ?? 0); y++)
    for (let x = gridPos.x ?? 0; x < (gridPos.x ?? 0) + (gridPos.w ?? 0); x++) cells.push(`${x},${y}`);
  return cells;
};

describe("the Grafana dashboard", () => {
  const dashboard = readDashboard();
  const panels = dashboard.panels ?? [];

  it("when Grafana imports it, then it has a uid, a title, schemaVersion 39 or later and a Prometheus datasource variable", () => {
    expect(dashboard.uid).toMatch(/^[\w-]{1,40}$/);
    expect(dashboard.title).toBeTruthy();
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(39);
    expect(dashboard.templating?.list).toContainEqual(expect.objectContaining({ name: "datasource", type: "datasource", query: "prometheus" }));
  });

  it("when its panels are laid out, then each has a unique id, a type and a place inside the 24 columns, and no two overlap", () => {
    expect(panels.length).toBeGreaterThan(10);
    const ids = panels.map((panel) => panel.id);
    expect(new Set(ids).size).toBe(ids.length);
    const taken = new Map<string, string>();
    const overlaps: string[] = [];
    for (const panel of panels) {
      expect(panel.type, `panel ${panel.id}`).toMatch(/^(row|timeseries|stat)$/);
      const { h = 0, w = 0, x = -1, y = -1 } = panel.gridPos ?? {};
      expect([h > 0, w > 0, x >= 0, y >= 0, x + w <= 24], `gridPos of "${panel.title}"`).toEqual([true, true, true, true, true]);
      for (const cell of cellsOf(panel.gridPos ?? {})) {
        const other = taken.get(cell);
        if (other !== undefined) overlaps.push(`"${panel.title}" over "${other}" at ${cell}`);
        taken.set(cell, panel.title ?? "");
      }
    }
    expect([...new Set(overlaps)]).toEqual([]);
  });

  it("when a panel queries, then it and each of its targets ask the datasource variable, and every target has a refId and an expression", () => {
    const queried = panels.filter((panel) => panel.type !== "row");
    expect(queried.length).toBeGreaterThan(0);
    for (const panel of queried) {
      expect(panel.datasource, `"${panel.title}"`).toEqual({ type: "prometheus", uid: "${datasource}" });
      expect(panel.targets?.length, `"${panel.title}" has no targets`).toBeGreaterThan(0);
      const refIds = (panel.targets ?? []).map((target) => target.refId);
      expect(new Set(refIds).size, `"${panel.title}" repeats a refId`).toBe(refIds.length);
      for (const target of panel.targets ?? []) {
        expect(target.datasource, `"${panel.title}" ${target.refId}`).toEqual({ type: "prometheus", uid: "${datasource}" });
        expect(target.expr?.trim(), `"${panel.title}" ${target.refId}`).toBeTruthy();
      }
    }
  });
});

describe("the Prometheus alert rules", () => {
  const rules = readAlertRules();

  it("when an alert fires, then it has a unique name, a severity, a summary and a runbook line in docs/operations.md", () => {
    const alerts = rules.filter((rule) => rule.alert !== undefined);
    expect(alerts.length).toBeGreaterThan(5);
    expect(new Set(alerts.map((rule) => rule.alert)).size).toBe(alerts.length);
    const anchors = runbookAnchors();
    for (const rule of alerts) {
      const name = rule.alert ?? "";
      expect(rule.expr?.trim(), name).toBeTruthy();
      expect(rule.labels?.severity, name).toMatch(/^(warning|critical)$/);
      expect(rule.annotations?.summary, name).toBeTruthy();
      const runbook = /^docs\/operations\.md#(.+)$/.exec(rule.annotations?.runbook_url ?? "");
      expect(runbook?.[1], `${name}'s runbook_url`).toBe(name.toLowerCase());
      expect(anchors.has(runbook?.[1] ?? ""), `${name}: no heading "${name}" under "Dashboard and alerts" in docs/operations.md`).toBe(true);
    }
  });

  it("when docs/operations.md lists runbooks, then each is of an alert the rules hold", () => {
    const alerts = new Set(rules.map((rule) => rule.alert?.toLowerCase()));
    expect([...runbookAnchors()].filter((anchor) => !alerts.has(anchor))).toEqual([]);
  });
});

describe("the metric names of PromQL queries", () => {
  it("when an expression calls functions, aggregates by labels and matches label values, then only the metrics it selects are named", () => {
    expect(
      metricNamesIn(
        'histogram_quantile(0.99, sum by (operation, le) (rate(likes_graphql_request_duration_seconds_bucket{type="query",le!="+Inf"}[$__rate_interval])))',
      ),
    ).toEqual(["likes_graphql_request_duration_seconds_bucket"]);
    expect(metricNamesIn("max(a_used / (a_max > 0)) > 0.85 and on(instance) group_left(pod) b_total offset 5m unless sum(c) without (job)")).toEqual([
      "a_used",
      "a_max",
      "b_total",
      "c",
    ]);
    expect(metricNamesIn('sum(rate(x_total{code=~"by|rate(y)"}[5m])) by (code) / ignoring(code) group_right z:recorded')).toEqual(["x_total", "z:recorded"]);
    expect(metricNamesIn("1e3 * vector(1) + inf")).toEqual([]);
  });

  it("when a /metrics text declares families, then counters and gauges are served by name and histograms by their series' suffixes", () => {
    const families = metricFamilies(
      ["# HELP h_seconds A histogram", "# TYPE h_seconds histogram", "# TYPE c_total counter", "c_total 0", "# TYPE g gauge", "# TYPE s summary"].join("\n"),
    );
    const served = ["h_seconds_bucket", "h_seconds_sum", "h_seconds_count", "c_total", "g", "s_sum", "s_count", "s"];
    const notServed = ["h_seconds", "c_total_count", "g_sum", "s_bucket", "absent_total"];
    expect(served.filter((name) => !isServed(name, families))).toEqual([]);
    expect(notServed.filter((name) => isServed(name, families))).toEqual([]);
  });

  it("when the dashboard's and the rules' queries are read, then each names at least one metric, and every one is the service's own", () => {
    for (const { where, expr } of deployedQueries()) {
      const names = metricNamesIn(expr);
      expect(names.length, where).toBeGreaterThan(0);
      expect(
        names.filter((name) => !name.startsWith("likes_")),
        where,
      ).toEqual([]);
    }
  });
});
