// Which commits a rebuild's snapshot saw, read from pg_snapshot's text form.
import { describe, expect, it } from "vitest";
import { sawCommit } from "../../../../src/stores/postgres/snapshot-store.js";

describe("snapshot marks", () => {
  it.each([
    ["100:105:", 99n, true],
    ["100:105:", 100n, true],
    ["100:105:", 104n, true],
    ["100:105:", 105n, false],
    ["100:105:100,103", 100n, false],
    ["100:105:100,103", 101n, true],
    ["100:105:100,103", 103n, false],
    ["100:105:100,103", 200n, false],
  ])("when the mark is %s, then transaction %s was seen: %s", (mark, txid, seen) => {
    expect(sawCommit(mark, txid)).toBe(seen);
  });
});
