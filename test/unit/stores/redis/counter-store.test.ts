// read-targets.lua's one-string reply, decoded.
import { describe, expect, it } from "vitest";
import { decodeTargetLines } from "../../../../src/stores/redis/counter-store.js";

const names = ["like", "read", "comment", "collect"];

describe("read-targets reply", () => {
  it("when lines hold counters, generations and likes, then each target decodes to its own", () => {
    expect(decodeTargetLines("12,,3,,0,1;;5,1,0,0,2,?;0,,,,0,", 4, names)).toEqual([
      { counts: { like: 12, comment: 3 }, generation: 0, viewerLikes: true, unsure: false },
      null,
      { counts: { like: 5, read: 1, comment: 0, collect: 0 }, generation: 2, viewerLikes: false, unsure: true },
      { counts: { like: 0 }, generation: 0, viewerLikes: false, unsure: false },
    ]);
  });

  it("when the only target is absent or there are none, then the empty text decodes to that", () => {
    expect(decodeTargetLines("", 1, names)).toEqual([null]);
    expect(decodeTargetLines("", 0, names)).toEqual([]);
  });

  it("when the reply has a line too many or too few, then it is refused", () => {
    expect(() => decodeTargetLines("1,,,,0,0;2,,,,0,0", 1, names)).toThrow(/2 lines for 1 targets/);
    expect(() => decodeTargetLines("1,,,,0,0", 2, names)).toThrow(/1 lines for 2 targets/);
  });

  it("when a line is not counters, a generation and a like, then it is refused", () => {
    expect(() => decodeTargetLines("1,x,,,0,0", 1, names)).toThrow(/malformed line for target 1/);
    expect(() => decodeTargetLines("1,,,,0", 1, names)).toThrow(/malformed line for target 1/);
    expect(() => decodeTargetLines("1,,,,0,0,", 1, names)).toThrow(/malformed line for target 1/);
  });

  it("when counters are negative or large, then they decode exactly", () => {
    expect(decodeTargetLines("-3,9007199254740991,,,5,", 1, names)).toEqual([{ counts: { like: -3, read: 9007199254740991 }, generation: 5, viewerLikes: false, unsure: false }]);
  });
});
