// Two fast cases of the fault suite (npm run chaos), with shorter loads: the
// service started as users start it, on the suite's private Redis, PostgreSQL
// cluster and RabbitMQ vhost, faults injected for real, and every acknowledged
// like, unlike and view checked in both stores afterwards. A held write is tested
// in test/integration/graphql/redis-faults.test.ts; npm run chaos runs the rest.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, inject, it } from "vitest";
import { missedTargets, type CaseResult } from "../../scripts/chaos/case-result.js";
import { formatEvidence } from "../../scripts/chaos/report.js";
import { runChaos } from "../../scripts/chaos/suite.js";
import { privateDatabaseUrl } from "../support/env.js";

/** What the check found, in numbers, with the evidence when any is not zero. */
function findings(r: CaseResult) {
  const v = r.verdict;
  return {
    case: r.name,
    error: r.error,
    settled: r.settling?.settled ?? false,
    deadLettered: r.settling?.deadLettered ?? -1,
    lost: v?.lost.length ?? -1,
    doubled: v?.doubledCount ?? -1,
    drift: v?.drift.length ?? -1,
    misanswered: v?.misanswered.length ?? -1,
    viewsLost: r.views?.lost ?? -1,
    viewsDoubled: r.views?.doubled ?? -1,
    viewsDrift: r.views ? r.views.drift : "not checked",
    missedTargets: missedTargets(r).map((f) => `${f.name}: ${f.value}`),
  };
}

const clean = (r: CaseResult) => ({
  case: r.name,
  error: null,
  settled: true,
  deadLettered: 0,
  lost: 0,
  doubled: 0,
  drift: 0,
  misanswered: 0,
  viewsLost: 0,
  viewsDoubled: 0,
  viewsDrift: null,
  missedTargets: [],
});

describe("the fault suite", () => {
  it("when Redis connections are reset, or Redis stalls, during a burst of likes, unlikes and views, then every acknowledged change and view is in Redis and PostgreSQL once and the counters agree", async () => {
    const results = await runChaos({
      cases: ["redis-resets", "redis-stall"],
      directory: mkdtempSync(path.join(tmpdir(), "likes-chaos-test-")),
      amqpUrl: inject("amqpUrl"),
      sharedDatabaseUrl: privateDatabaseUrl(),
      loadScale: 0.5,
      load: { likers: 12 },
      settleTimeoutMs: 30_000,
      // Outbox entries whose read reply a reset lost wait this long for the relay to take them back (30 s by default).
      serviceEnv: { RELAY_CLAIM_IDLE_MS: "3000" },
    });
    for (const r of results) {
      expect(r.acknowledged, `${r.name} acknowledged nothing`).toBeGreaterThan(50);
      expect(r.views?.acknowledged, `${r.name} counted no view`).toBeGreaterThan(100);
      expect(findings(r), formatEvidence([r])).toEqual(clean(r));
    }
  }, 180_000);
});
