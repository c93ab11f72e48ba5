// likes_readiness_checks_failed_total: what the LikesNotReady alert and the dashboard's
// readiness panel read, counted in each report the readiness makes.
import { describe, expect, it } from "vitest";
import { createApiMetrics } from "../../../src/graphql/api-metrics.js";
import { createReadiness } from "../../../src/graphql/readiness.js";

/** The counter's value for one check and effect, as the API's /metrics tells it. */
async function failures(metrics: ReturnType<typeof createApiMetrics>, check: string, effect: string): Promise<number> {
  const text = await metrics.registry.metrics();
  const line = new RegExp(`^likes_readiness_checks_failed_total\\{check="${check}",effect="${effect}"\\} (\\d+)$`, "m").exec(text);
  return line ? Number(line[1]) : Number.NaN;
}

describe("readiness metrics", () => {
  it("when a probe fails and an advisory finds a problem, then each report counts them by check and effect, and the checks that passed stay at 0", async () => {
    const metrics = createApiMetrics();
    const readiness = createReadiness(
      { db: async () => "ok", cache: () => Promise.reject(new Error("connection refused")) },
      100,
      { backlog: async () => "20000 changes wait", broker: async () => null },
      metrics.readinessFailures,
    );
    const before = await Promise.all([
      failures(metrics, "db", "unavailable"),
      failures(metrics, "cache", "unavailable"),
      failures(metrics, "backlog", "degraded"),
    ]);

    await readiness();
    const report = await readiness();

    expect(before).toEqual([0, 0, 0]);
    expect(report.ready).toBe(false);
    expect(await failures(metrics, "cache", "unavailable")).toBe(2);
    expect(await failures(metrics, "backlog", "degraded")).toBe(2);
    expect(await failures(metrics, "db", "unavailable")).toBe(0);
    expect(await failures(metrics, "broker", "degraded")).toBe(0);
  });

  it("when two API processes' metrics exist in one process, then each counts only its own readiness", async () => {
    const [first, second] = [createApiMetrics(), createApiMetrics()];
    await createReadiness({ served: () => Promise.reject(new Error("down")) }, 100, {}, first.readinessFailures)();

    expect(await failures(first, "served", "unavailable")).toBe(1);
    expect(await failures(second, "served", "unavailable")).toBeNaN();
  });
});
