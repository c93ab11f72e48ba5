import { describe, expect, it } from "vitest";
import { DomainError } from "../../../src/errors.js";
import { parseId, parsePageSize } from "../../../src/graphql/arguments.js";

describe("ids and page sizes", () => {
  it("when an id is a positive decimal within bigint range, then it parses", () => {
    expect(parseId("1", "id")).toBe(1n);
    expect(parseId("9223372036854775807", "id")).toBe(9223372036854775807n);
  });

  it.each(["", "0", "-1", "01", "1.5", "abc", " 1", "9223372036854775808", "1".repeat(20)])("when an id is %j, then it is BAD_USER_INPUT", (raw) => {
    expect(() => parseId(raw, "id")).toThrow(DomainError);
    try {
      parseId(raw, "id");
    } catch (error) {
      expect((error as DomainError).code).toBe("BAD_USER_INPUT");
    }
  });

  it("when a page size is out of 0..100, then it is refused", () => {
    expect(parsePageSize(0)).toBe(0);
    expect(parsePageSize(100)).toBe(100);
    expect(() => parsePageSize(101)).toThrow(DomainError);
    expect(() => parsePageSize(-1)).toThrow(DomainError);
  });
});
