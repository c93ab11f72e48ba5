import { describe, expect, it } from "vitest";
import { DomainError } from "../../../src/errors.js";
import { decodeCursor, decodeListCursor, decodeMemberCursor, encodeCursor, encodeListCursor, encodeMemberCursor } from "../../../src/graphql/cursors.js";

describe("id cursors", () => {
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
});

describe("members and list cursors", () => {
  it("when a members cursor names a user beyond any id, then it is refused as bad input", () => {
    const position = { at: new Date("2026-11-22T10:00:00.000Z"), userId: 42n };
    expect(decodeMemberCursor(encodeMemberCursor(position))).toEqual(position);
    const tooBig = Buffer.from("l:1795344000000:9999999999999999999").toString("base64url");
    expect(() => decodeMemberCursor(tooBig)).toThrow(expect.objectContaining({ code: "BAD_USER_INPUT" }));
  });

  it("when a list cursor is read back, then it names the same position; one beyond any id or time is bad input", () => {
    const position = { at: new Date("2026-11-22T10:00:00.123Z"), targetId: 9n };
    expect(decodeListCursor(encodeListCursor(position))).toEqual(position);
    for (const text of ["p:1795344000000:9999999999999999999", "p:999999999999999:1", "l:1795344000000:1", "p:1:0"]) {
      expect(() => decodeListCursor(Buffer.from(text).toString("base64url"))).toThrow(expect.objectContaining({ code: "BAD_USER_INPUT" }));
    }
  });
});
