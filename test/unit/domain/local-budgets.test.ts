// The mutation budgets decided in process memory (GCRA, as charge-budget.lua),
// on an injected clock, with reports to a stand-in for Redis the test answers.
import { describe, expect, it } from "vitest";
import { createLocalBudgets, reportThreshold, type LocalBudgetOptions } from "../../../src/domain/local-budgets.js";
import type { BudgetSpending } from "../../../src/domain/ports/index.js";

const periodMs = 60_000;

interface Report {
  readonly spendings: readonly BudgetSpending[];
  answer(aheadMs: readonly number[]): void;
  fail(error: Error): void;
}

/** Local budgets on a clock the test moves, whose reports wait until the test answers them. */
function budgetsOnTestClock(options: Partial<LocalBudgetOptions> = {}) {
  let nowMs = 1_000_000;
  const reports: Report[] = [];
  const failures: unknown[] = [];
  const budgets = createLocalBudgets({
    periodMs,
    maxSubjects: 100,
    nowMs: () => nowMs,
    report: (spendings) => new Promise((resolve, reject) => reports.push({ spendings, answer: resolve, fail: reject })),
    onReportFailure: (error) => failures.push(error),
    ...options,
  });
  return {
    charge: (subject: string, limit: number, cost = 1, budget = "userMutations") => budgets.charge([{ budget, subject, cost, limit }]),
    budgets,
    reports,
    failures,
    advance: (ms: number) => void (nowMs += ms),
  };
}

/** Lets the reports queued in this turn of the event loop leave, and answers arrive. */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe("mutation budgets decided in process memory", () => {
  it("when units are spent and time passes, then the budget tells how long until it is full again, and a subject never charged is full", () => {
    const { budgets, charge, advance } = budgetsOnTestClock();
    expect(budgets.aheadMs("userMutations", "alice")).toBe(0);
    charge("alice", 10, 4);
    expect(budgets.aheadMs("userMutations", "alice")).toBe(24_000);
    advance(10_000);
    expect(budgets.aheadMs("userMutations", "alice")).toBe(14_000);
    advance(20_000);
    expect(budgets.aheadMs("userMutations", "alice")).toBe(0);
  });

  it("when a quiet subject spends, then it may spend its whole limit at once and the next unit is refused with one interval's wait", () => {
    const { charge } = budgetsOnTestClock();
    for (let i = 0; i < 10; i++) expect(charge("alice", 10)).toBeNull();
    // 10 a minute: a unit refills every 6 s.
    expect(charge("alice", 10)).toMatchObject({ waitMs: 6_000 });
    expect(charge("alice", 10, 3)).toMatchObject({ waitMs: 18_000 });
    // Refusals spent nothing: the wait has not grown.
    expect(charge("alice", 10)).toMatchObject({ waitMs: 6_000 });
    expect(charge("bob", 10)).toBeNull();
  });

  it("when time passes, then the budget refills one unit per interval and never holds more than its limit", () => {
    const { charge, advance } = budgetsOnTestClock();
    for (let i = 0; i < 10; i++) charge("alice", 10);
    advance(5_999);
    expect(charge("alice", 10)).toMatchObject({ waitMs: 1 });
    advance(1);
    expect(charge("alice", 10)).toBeNull();
    expect(charge("alice", 10)).toMatchObject({ waitMs: 6_000 });
    advance(10 * periodMs);
    for (let i = 0; i < 10; i++) expect(charge("alice", 10)).toBeNull();
    expect(charge("alice", 10)).not.toBeNull();
  });

  it("when one charge of a call is refused, then none of the call's charges is spent, and the longest wait is answered", () => {
    const { budgets, charge } = budgetsOnTestClock();
    for (let i = 0; i < 3; i++) charge("10.0.0.1", 3, 1, "ipMutations");
    const refused = budgets.charge([
      { budget: "userMutations", subject: "alice", cost: 2, limit: 10 },
      { budget: "ipMutations", subject: "10.0.0.1", cost: 2, limit: 3 },
    ]);
    expect(refused).toEqual({ charge: { budget: "ipMutations", subject: "10.0.0.1", cost: 2, limit: 3 }, waitMs: 40_000, aheadMs: 60_000 });
    for (let i = 0; i < 10; i++) expect(charge("alice", 10)).toBeNull();
    expect(charge("alice", 10)).not.toBeNull();
  });

  it("when a subject's unreported units reach the threshold, then they are reported once, with every report due in the same turn, and fewer are not", async () => {
    const { charge, reports } = budgetsOnTestClock();
    // 20 a minute: reported every 2 units.
    charge("alice", 20);
    await nextTurn();
    expect(reports).toHaveLength(0);
    charge("alice", 20);
    charge("bob", 20, 2);
    charge("carol", 20);
    await nextTurn();
    expect(reports.map((r) => r.spendings)).toEqual([
      [
        { budget: "userMutations", subject: "alice", units: 2, limit: 20, periodMs },
        { budget: "userMutations", subject: "bob", units: 2, limit: 20, periodMs },
      ],
    ]);
    // While alice's report is away, her next units wait for its answer, then go in a report of their own.
    charge("alice", 20);
    charge("alice", 20);
    charge("alice", 20);
    await nextTurn();
    expect(reports).toHaveLength(1);
    reports[0]?.answer([0, 0]);
    await nextTurn();
    await nextTurn();
    expect(reports.map((r) => r.spendings.map((s) => [s.subject, s.units]))).toEqual([
      [
        ["alice", 2],
        ["bob", 2],
      ],
      [["alice", 3]],
    ]);
  });

  it("when Redis answers that a budget is spent further, then the local state is raised to it, and an answer of less lowers nothing", async () => {
    const { charge, reports } = budgetsOnTestClock();
    // 10 a minute: reported every unit.
    expect(charge("alice", 10)).toBeNull();
    for (let i = 0; i < 5; i++) expect(charge("bob", 10)).toBeNull();
    await nextTurn();
    // Other processes spent alice's whole budget; bob's shared state knows less than this process.
    reports[0]?.answer([periodMs, 1_000]);
    await nextTurn();
    expect(charge("alice", 10)).toMatchObject({ waitMs: 6_000 });
    for (let i = 0; i < 5; i++) expect(charge("bob", 10)).toBeNull();
    expect(charge("bob", 10)).not.toBeNull();
  });

  it("when a report fails, then the failure is told, its units are dropped, no report leaves for a second, and charges go on decided here", async () => {
    const { charge, reports, failures, advance } = budgetsOnTestClock();
    charge("alice", 10);
    await nextTurn();
    reports[0]?.fail(new Error("Command timed out"));
    await nextTurn();
    expect(failures).toEqual([new Error("Command timed out")]);
    for (let i = 0; i < 3; i++) expect(charge("alice", 10)).toBeNull();
    await nextTurn();
    expect(reports).toHaveLength(1);
    advance(1_000);
    // The units spent while reports were held back leave with the next charge.
    expect(charge("alice", 10)).toBeNull();
    await nextTurn();
    expect(reports[1]?.spendings.map((s) => s.units)).toEqual([4]);
  });

  it("when more subjects are charged than the process holds, then the least recently charged is forgotten", async () => {
    const { charge } = budgetsOnTestClock({ maxSubjects: 2 });
    charge("alice", 2);
    charge("alice", 2);
    expect(charge("alice", 2)).not.toBeNull();
    charge("bob", 2);
    charge("carol", 2);
    // Alice's state went with her; what this process reported of her is in Redis still.
    expect(charge("alice", 2)).toBeNull();
  });

  it.each([
    [1, 1],
    [10, 1],
    [11, 2],
    [600, 60],
    [3000, 300],
  ])("when a budget holds %i units, then a process reports every %i", (limit, threshold) => {
    expect(reportThreshold(limit)).toBe(threshold);
  });
});
