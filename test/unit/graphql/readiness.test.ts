// A readiness check shared by every probe of a process: at most one run at a time,
// its result answering every caller while younger than its bound.
import { describe, expect, it } from "vitest";
import { shared } from "../../../src/graphql/readiness.js";

describe("shared readiness checks", () => {
  it("when many callers ask at once and again within the bound, then the check runs once and each gets its result", async () => {
    let runs = 0;
    let clock = 0;
    const check = shared(
      async () => ++runs,
      1_000,
      () => clock,
    );
    expect(await Promise.all(Array.from({ length: 50 }, () => check()))).toEqual(Array.from({ length: 50 }, () => 1));
    clock = 999;
    expect(await check()).toBe(1);
    clock = 1_000;
    expect(await check()).toBe(2);
    expect(runs).toBe(2);
  });

  it("when a run outlasts the bound, then callers wait for it rather than start another", async () => {
    let runs = 0;
    let clock = 0;
    let release: () => void = () => undefined;
    const check = shared(
      () => new Promise<number>((resolve) => (release = () => resolve(++runs))),
      100,
      () => clock,
    );
    const first = check();
    clock = 5_000;
    const second = check();
    release();
    expect([await first, await second]).toEqual([1, 1]);
    expect(runs).toBe(1);
  });

  it("when a run fails, then its failure answers within the bound and a later call runs again", async () => {
    let runs = 0;
    let clock = 0;
    const check = shared(
      async () => {
        runs++;
        if (runs === 1) throw new Error("no answer");
        return runs;
      },
      1_000,
      () => clock,
    );
    await expect(check()).rejects.toThrow("no answer");
    await expect(check()).rejects.toThrow("no answer");
    clock = 1_000;
    expect(await check()).toBe(2);
  });
});
