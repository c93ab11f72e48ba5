// likes_readiness_checks_failed_total: what the LikesNotReady alert and the dashboard's
// readiness panel read, counted in each report the readiness makes.
import { describe, expect, it } from "vitest";
import { createApiMetrics } from "../../../src/graphql/api-metrics.js";
import { createReadiness, readinessChecksFailed } from "../../../src/graphql/readiness.js";

/** The counter's value for one check and effect, as it stands now. */
async function failures(check: string, effect: string): Promise<number> {
  const { values } = await readinessChecksFailed.get();
  return values.find((v) => v.labels.check === check && v.labels.effect === effect)?.value ?? Number.NaN;
}

describe("readiness metrics", () => {
  it("when a probe fails and an advisory finds a problem, then each report counts them by check and effect, and the checks that passed stay at 0", async () => {
    const readiness = createReadiness({ "unit-db": async () => "ok", "unit-cache": () => Promise.reject(new Error("connection refused")) }, 100, {
      "unit-backlog": async () => "20000 changes wait",
      "unit-broker": async () => null,
    });
    const before = await Promise.all([failures("unit-db", "unavailable"), failures("unit-cache", "unavailable"), failures("unit-backlog", "degraded")]);

    await readiness();
    const report = await readiness();

    expect(before).toEqual([0, 0, 0]);
    expect(report.ready).toBe(false);
    expect(await failures("unit-cache", "unavailable")).toBe(2);
    expect(await failures("unit-backlog", "degraded")).toBe(2);
    expect(await failures("unit-db", "unavailable")).toBe(0);
    expect(await failures("unit-broker", "degraded")).toBe(0);
  });

  it("when an API process's metrics are collected, then they include the readiness counter", async () => {
    createReadiness({ "unit-served": () => Promise.reject(new Error("down")) }, 100);

    const text = await createApiMetrics().registry.metrics();

    expect(text).toContain("# TYPE likes_readiness_checks_failed_total counter");
    expect(text).toMatch(/^likes_readiness_checks_failed_total\{check="unit-served",effect="unavailable"\} 0$/m);
  });
});
