import { describe, expect, it } from "vitest";
import { hashPassword, verifyPassword } from "../../../src/domain/identity.js";
import { validateRegistration } from "../../../src/domain/users.js";

describe("registration rules and identity", () => {
  it.each([
    ["ab", "a@b.io", "secret123", "username"],
    ["bad name", "a@b.io", "secret123", "username"],
    ["good_name", "a@b", "secret123", "email"],
    ["good_name", "a@b.io", "secret", "password"],
    ["good_name", "a@b.io", "12345678", "password"],
  ])("when registering %j %j %j, then %s is refused", (username, email, password, field) => {
    expect(() => validateRegistration(username, email, password)).toThrow(expect.objectContaining({ field, code: "BAD_USER_INPUT" }));
  });

  it("when a password is hashed, then only that password verifies and the salt differs each time", async () => {
    const a = await hashPassword("secret123");
    const b = await hashPassword("secret123");
    expect(a).not.toBe(b);
    expect(await verifyPassword("secret123", a)).toBe(true);
    expect(await verifyPassword("secret124", a)).toBe(false);
  });
});
