import { describe, expect, it } from "vitest";
import { createHmac } from "node:crypto";
import { hashPassword, verifyPassword, createTokenService, verifyHs256 } from "../../../src/domain/identity.js";
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

  it("when a token is expired, forged with another algorithm or carries a bad subject, then it names nobody", async () => {
    const secret = Buffer.from("a-secret-of-enough-length");
    const sign = (header: object, claims: object) => {
      const h = Buffer.from(JSON.stringify(header)).toString("base64url");
      const p = Buffer.from(JSON.stringify(claims)).toString("base64url");
      return `${h}.${p}.${createHmac("sha256", secret).update(`${h}.${p}`).digest("base64url")}`;
    };
    const now = 1_800_000_000;
    expect(verifyHs256(sign({ alg: "HS256" }, { sub: "7", exp: now + 60 }), secret, now)).toEqual({ sub: "7", exp: now + 60 });
    expect(verifyHs256(sign({ alg: "HS256" }, { sub: "7", exp: now - 1 }), secret, now)).toBeNull();
    expect(verifyHs256(sign({ alg: "none" }, { sub: "7", exp: now + 60 }), secret, now)).toBeNull();
    expect(verifyHs256(sign({ alg: "HS256" }, { sub: "07", exp: now + 60 }), secret, now)).toBeNull();
    expect(verifyHs256(sign({ alg: "HS256" }, { sub: 7, exp: now + 60 }), secret, now)).toBeNull();
    expect(verifyHs256(sign({ alg: "HS256" }, { sub: "7" }), secret, now)).toBeNull();
    expect(verifyHs256("a.b", secret, now)).toBeNull();
  });

  it("when a token is signed with another secret or tampered with, then it names nobody", async () => {
    const ours = createTokenService({ secret: "a-secret-of-enough-length", ttlSeconds: 60 });
    const theirs = createTokenService({ secret: "another-secret-of-length", ttlSeconds: 60 });
    const token = await ours.issue(42n);
    expect(ours.verify(token)).toEqual({ userId: 42n });
    expect(ours.verify(await theirs.issue(42n))).toBeNull();
    expect(ours.verify(`${token.slice(0, -2)}xx`)).toBeNull();
  });
});
