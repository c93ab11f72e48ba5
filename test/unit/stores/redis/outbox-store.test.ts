// Decoding outbox entries as scripts/includes/append-event.lua writes them.
import { describe, expect, it } from "vitest";
import { decodeOutboxEntry } from "../../../../src/stores/redis/outbox-entries.js";

const fields = (overrides: Record<string, string> = {}) =>
  Object.entries({ t: "comment", i: "42", u: "7", s: "1", v: "1795343997282123", a: "3", ts: "1795343997282", ...overrides }).flat();

describe("outbox entries", () => {
  it("when an entry holds a like, then it decodes to the change with its partition and entry id", () => {
    expect(decodeOutboxEntry(5, "1-0", fields())).toEqual({
      partition: 5,
      entryId: "1-0",
      change: {
        kind: "relation",
        relation: "like",
        target: { type: "comment", id: 42n },
        userId: 7n,
        authorId: 3n,
        member: true,
        version: 1795343997282123n,
        at: new Date(1795343997282),
      },
    });
    expect(decodeOutboxEntry(5, "1-1", fields({ s: "0", a: "" }))).toMatchObject({ change: { member: false, authorId: null } });
  });

  it("when an entry holds a collect or a follow, then its relation comes from its tag", () => {
    expect(decodeOutboxEntry(5, "1-0", fields({ t: "post", r: "c" }))).toMatchObject({ change: { relation: "collect", target: { type: "post", id: 42n } } });
    expect(decodeOutboxEntry(5, "1-0", fields({ t: "user", r: "f", a: "" }))).toMatchObject({
      change: { relation: "follow", target: { type: "user", id: 42n } },
    });
  });

  it("when an entry holds views, then it decodes to their count and the epoch's total", () => {
    const views = Object.entries({ t: "post", i: "42", k: "v", n: "5", o: "17", e: "2", v: "1795343997282123", ts: "1795343997282" }).flat();
    expect(decodeOutboxEntry(5, "1-0", views)).toEqual({
      partition: 5,
      entryId: "1-0",
      change: {
        kind: "views",
        target: { type: "post", id: 42n },
        count: 5,
        total: 17,
        version: 2n * 10n ** 16n + 1795343997282123n,
        at: new Date(1795343997282),
      },
    });
  });

  it.each([
    ["an unknown target type", { t: "planet" }, /t is not a target of the relation/],
    ["a relation the target has none of", { r: "f" }, /t is not a target of the relation/],
    ["an unknown relation tag", { r: "x" }, /r is not a relation/],
    ["views without a count", { t: "post", k: "v", o: "3" }, /n is not a count/],
    ["a user that is not an id", { u: "07" }, /u is not an id/],
    ["a state other than 0 or 1", { s: "2" }, /s is not 0 or 1/],
    ["no version", { v: "" }, /v is not a version/],
    ["a time that is not one", { ts: "soon" }, /ts is not a time/],
  ])("when an entry has %s, then it is malformed with the reason", (_, overrides, reason) => {
    const decoded = decodeOutboxEntry(5, "1-0", fields(overrides));
    expect("problem" in decoded && decoded.problem).toMatch(reason);
  });
});
