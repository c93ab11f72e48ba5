// The ring of changes an API process acknowledged lately: bounded, newest per pair,
// and only what was acknowledged before a failover was found.
import { performance } from "node:perf_hooks";
import { describe, expect, it } from "vitest";
import { AcknowledgedChanges } from "../../../src/domain/acknowledged-changes.js";
import type { Target } from "../../../src/domain/model/index.js";

const post = (id: bigint): Target => ({ type: "post", id });
const like = (target: Target, userId: bigint, version: bigint, member = true) => ({ target, relation: "like" as const, userId, member, version });

describe("the changes a process acknowledged", () => {
  it("when a pair changed several times, then only its newest change is kept for the check", () => {
    const journal = new AcknowledgedChanges(10);
    journal.record(like(post(1n), 7n, 5n));
    journal.record(like(post(1n), 7n, 9n, false));
    journal.record(like(post(1n), 8n, 6n));
    const kept = journal.before(performance.now() + 1);
    expect(kept.map((c) => [c.userId, c.version, c.member])).toEqual([
      [7n, 9n, false],
      [8n, 6n, true],
    ]);
  });

  it("when more changes come than it holds, then the oldest give way and memory stays at its capacity", () => {
    const journal = new AcknowledgedChanges(3);
    for (let user = 1n; user <= 5n; user++) journal.record(like(post(1n), user, user));
    expect(journal.before(performance.now() + 1).map((c) => c.userId)).toEqual([4n, 5n, 3n]);
  });

  it("when asked for what came before a moment, then later changes and those older than it keeps are left out", () => {
    let clock = 1_000;
    const journal = new AcknowledgedChanges(10, 50, () => clock);
    journal.record(like(post(1n), 1n, 1n));
    clock += 60;
    journal.record(like(post(1n), 2n, 2n));
    clock += 1;
    const moment = clock;
    journal.record(like(post(1n), 3n, 3n));
    expect(journal.before(moment).map((c) => c.userId)).toEqual([2n]);
  });
});
