import { describe, expect, it } from "vitest";
import { decodeCursor, encodeCursor, parseId, parsePageSize } from "../../../src/domain/ids.js";
import { DomainError } from "../../../src/errors.js";

describe("ids and cursors", () => {
  it("when an id is a positive decimal within bigint range, then it parses", () => {
    expect(parseId("1", "id")).toBe(1n);
    expect(parseId("9223372036854775807", "id")).toBe(9223372036854775807n);
  });

  it.each(["", "0", "-1", "01", "1.5", "abc", " 1", "9223372036854775808", "1".repeat(20)])(
    "when an id is %j, then it is BAD_USER_INPUT",
    (raw) => {
      expect(() => parseId(raw, "id")).toThrow(DomainError);
      try {
        parseId(raw, "id");
      } catch (error) {
        expect((error as DomainError).code).toBe("BAD_USER_INPUT");
      }
    },
  );

  it("when a cursor is encoded, then it decodes to the same id, and foreign cursors are refused", () => {
    expect(decodeCursor(encodeCursor(123456789012345n))).toBe(123456789012345n);
    expect(() => decodeCursor("bm9wZQ")).toThrow(/cursor/);
  });

  it("when a cursor holds an id above 2^63-1, then it is BAD_USER_INPUT naming the argument", () => {
    expect(decodeCursor(encodeCursor(2n ** 63n - 1n))).toBe(2n ** 63n - 1n);
    const tooLarge = Buffer.from(`c:${2n ** 63n}`).toString("base64url");
    expect(() => decodeCursor(tooLarge)).toThrow(expect.objectContaining({ code: "BAD_USER_INPUT", field: "after" }));
    expect(() => decodeCursor(Buffer.from("c:9999999999999999999").toString("base64url"))).toThrow(DomainError);
  });

  it("when a page size is out of 0..100, then it is refused", () => {
    expect(parsePageSize(0)).toBe(0);
    expect(parsePageSize(100)).toBe(100);
    expect(() => parsePageSize(101)).toThrow(DomainError);
    expect(() => parsePageSize(-1)).toThrow(DomainError);
  });
});

describe("members and list cursors", () => {
  it("when a members cursor names a user beyond any id, then it is refused as bad input", async () => {
    const { decodeMemberCursor, encodeMemberCursor } = await import("../../../src/domain/memberships.js");
    const position = { at: new Date("2026-11-22T10:00:00.000Z"), userId: 42n };
    expect(decodeMemberCursor(encodeMemberCursor(position))).toEqual(position);
    const tooBig = Buffer.from("l:1795344000000:9999999999999999999").toString("base64url");
    expect(() => decodeMemberCursor(tooBig)).toThrow(expect.objectContaining({ code: "BAD_USER_INPUT" }));
  });

  it("when a list cursor is read back, then it names the same position; one beyond any id or time is bad input", async () => {
    const { decodeListCursor, encodeListCursor } = await import("../../../src/domain/lists.js");
    const position = { at: new Date("2026-11-22T10:00:00.123Z"), targetId: 9n };
    expect(decodeListCursor(encodeListCursor(position))).toEqual(position);
    for (const text of ["p:1795344000000:9999999999999999999", "p:999999999999999:1", "l:1795344000000:1", "p:1:0"]) {
      expect(() => decodeListCursor(Buffer.from(text).toString("base64url"))).toThrow(expect.objectContaining({ code: "BAD_USER_INPUT" }));
    }
  });
});
