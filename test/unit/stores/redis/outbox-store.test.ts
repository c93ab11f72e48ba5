// Decoding outbox entries as scripts/includes/append-event.lua writes them.
import { describe, expect, it } from "vitest";
import { decodeOutboxEntry } from "../../../../src/stores/redis/outbox-store.js";

const fields = (overrides: Record<string, string> = {}) =>
  Object.entries({ t: "comment", i: "42", u: "7", s: "1", v: "1795343997282123", a: "3", ts: "1795343997282", ...overrides }).flat();

describe("outbox entries", () => {
  it("when an entry holds a like, then it decodes to the change with its partition and entry id", () => {
    expect(decodeOutboxEntry(5, "1-0", fields())).toEqual({
      partition: 5,
      entryId: "1-0",
      change: {
        target: { type: "comment", id: 42n },
        userId: 7n,
        authorId: 3n,
        liked: true,
        version: 1795343997282123n,
        at: new Date(1795343997282),
      },
    });
    expect(decodeOutboxEntry(5, "1-1", fields({ s: "0", a: "" }))).toMatchObject({ change: { liked: false, authorId: null } });
  });

  it.each([
    ["an unknown target type", { t: "planet" }, /t is not post or comment/],
    ["a user that is not an id", { u: "07" }, /u is not an id/],
    ["a state other than 0 or 1", { s: "2" }, /s is not 0 or 1/],
    ["no version", { v: "" }, /v is not a version/],
    ["a time that is not one", { ts: "soon" }, /ts is not a time/],
  ])("when an entry has %s, then it is malformed with the reason", (_, overrides, reason) => {
    const decoded = decodeOutboxEntry(5, "1-0", fields(overrides));
    expect("problem" in decoded && decoded.problem).toMatch(reason);
  });
});
