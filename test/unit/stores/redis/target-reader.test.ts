// read-targets.lua's one-string reply, decoded.
import { describe, expect, it } from "vitest";
import { decodeTargetLines } from "../../../../src/stores/redis/target-reader.js";

const names = ["like", "read", "comment", "collect"];
const relations = ["like", "collect"] as const;

describe("read-targets reply", () => {
  it("when lines hold counters, generations and memberships, then each target decodes to its own", () => {
    expect(decodeTargetLines("12,,3,,0,0,10;;5,1,0,0,2,0,?1;0,,,,0,0,", 4, names, relations)).toEqual([
      { counts: { like: 12, comment: 3 }, generations: [0, 0], viewerIn: { like: true, collect: false }, unsure: [false, false] },
      null,
      { counts: { like: 5, read: 1, comment: 0, collect: 0 }, generations: [2, 0], viewerIn: { like: false, collect: true }, unsure: [true, false] },
      { counts: { like: 0 }, generations: [0, 0], viewerIn: { like: false, collect: false }, unsure: [false, false] },
    ]);
  });

  it("when the only target is absent or there are none, then the empty text decodes to that", () => {
    expect(decodeTargetLines("", 1, names)).toEqual([null]);
    expect(decodeTargetLines("", 0, names)).toEqual([]);
  });

  it("when the reply has a line too many or too few, then it is refused", () => {
    expect(() => decodeTargetLines("1,,,,0,0,00;2,,,,0,0,00", 1, names, relations)).toThrow(/2 lines for 1 targets/);
    expect(() => decodeTargetLines("1,,,,0,0,00", 2, names, relations)).toThrow(/1 lines for 2 targets/);
  });

  it("when a line is not counters, generations and marks, then it is refused", () => {
    expect(() => decodeTargetLines("1,x,,,0,0,00", 1, names, relations)).toThrow(/malformed line for target 1/);
    expect(() => decodeTargetLines("1,,,,0,00", 1, names, relations)).toThrow(/malformed line for target 1/);
    expect(() => decodeTargetLines("1,,,,0,0,000", 1, names, relations)).toThrow(/malformed line for target 1/);
  });

  it("when counters are negative or large, then they decode exactly", () => {
    expect(decodeTargetLines("-3,9007199254740991,,,5,0,", 1, names, relations)).toEqual([
      { counts: { like: -3, read: 9007199254740991 }, generations: [5, 0], viewerIn: { like: false, collect: false }, unsure: [false, false] },
    ]);
  });
});
