// Bearer tokens: what standard JWT libraries make is accepted, every forgery refused.
import { createHmac, generateKeyPairSync } from "node:crypto";
import { SignJWT } from "jose";
import jwt from "jsonwebtoken";
import { describe, expect, it } from "vitest";
import { createTokenService, type TokenServiceOptions } from "../../../src/graphql/tokens.js";

const secret = "a-secret-of-enough-length";
const now = () => Math.floor(Date.now() / 1000);
const service = (options: Partial<TokenServiceOptions> = {}) => createTokenService({ secret, ttlSeconds: 60, ...options });

/** A token with exactly this header and these claims, HMAC-signed with `key` over them as a signer would. */
function sign(header: object, claims: object, algorithm = "sha256", key: string = secret): string {
  const h = Buffer.from(JSON.stringify(header)).toString("base64url");
  const p = Buffer.from(JSON.stringify(claims)).toString("base64url");
  return `${h}.${p}.${createHmac(algorithm, key).update(`${h}.${p}`).digest("base64url")}`;
}

describe("tokens standard libraries make", () => {
  it("when jsonwebtoken signs an HS256 token with typ JWT, then it names its subject", async () => {
    const token = jwt.sign({ sub: "42" }, secret, { algorithm: "HS256", expiresIn: 60 });
    expect(JSON.parse(Buffer.from(token.split(".")[0] as string, "base64url").toString())).toEqual({ alg: "HS256", typ: "JWT" });
    expect(await service().verify(token)).toEqual({ userId: 42n });
  });

  it("when jose signs with typ JWT and a kid, or typ in lower case, then it is accepted", async () => {
    const key = new TextEncoder().encode(secret);
    const withKid = await new SignJWT({}).setProtectedHeader({ alg: "HS256", typ: "JWT", kid: "2026-11" }).setSubject("7").setExpirationTime("1m").sign(key);
    expect(await service().verify(withKid)).toEqual({ userId: 7n });
    expect(await service().verify(sign({ alg: "HS256", typ: "jwt" }, { sub: "8", exp: now() + 60 }))).toEqual({ userId: 8n });
    expect(await service().verify(sign({ alg: "HS256" }, { sub: "9223372036854775807", exp: now() + 60 }))).toEqual({ userId: 2n ** 63n - 1n });
  });

  it("when a token expired less than the clock tolerance ago, then it is still accepted, and not once past it", async () => {
    const token = sign({ alg: "HS256", typ: "JWT" }, { sub: "5", exp: now() - 10 });
    expect(await service({ clockToleranceSeconds: 30 }).verify(token)).toEqual({ userId: 5n });
    expect(await service({ clockToleranceSeconds: 0 }).verify(token)).toBeNull();
  });

  it("when an issuer and audience are set, then issued tokens carry them and others' tokens are refused", async () => {
    const strict = service({ issuer: "likes", audience: "app" });
    expect(await strict.verify(await strict.issue(3n))).toEqual({ userId: 3n });
    const exp = now() + 60;
    expect(await strict.verify(sign({ alg: "HS256" }, { sub: "3", exp, iss: "likes", aud: ["app", "other"] }))).toEqual({ userId: 3n });
    for (const claims of [{}, { iss: "likes" }, { aud: "app" }, { iss: "evil", aud: "app" }, { iss: "likes", aud: "web" }]) {
      expect(await strict.verify(sign({ alg: "HS256" }, { sub: "3", exp, ...claims }))).toBeNull();
    }
  });
});

describe("forged and unacceptable tokens", () => {
  const exp = now() + 600;
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const rs256 = jwt.sign({ sub: "42" }, privateKey, { algorithm: "RS256", expiresIn: 60 });
  const [header, payload] = sign({ alg: "HS256" }, { sub: "42", exp }).split(".") as [string, string];

  it.each([
    ["alg none, unsigned", `${Buffer.from('{"alg":"none"}').toString("base64url")}.${payload}.`],
    ["alg none, signed", sign({ alg: "none" }, { sub: "42", exp })],
    ["HS512, correctly signed", sign({ alg: "HS512", typ: "JWT" }, { sub: "42", exp }, "sha512")],
    ["RS256, signed with an RSA key", rs256],
    ["an RS256 header over an HMAC signature", sign({ alg: "RS256" }, { sub: "42", exp })],
    ["crit naming a claim", sign({ alg: "HS256", crit: ["exp"] }, { sub: "42", exp })],
    ["crit naming an extension", sign({ alg: "HS256", crit: ["x-ours"], "x-ours": 1 }, { sub: "42", exp })],
    ["a jku header", sign({ alg: "HS256", jku: "https://evil.example/keys" }, { sub: "42", exp })],
    ["an unknown header field", sign({ alg: "HS256", typ: "JWT", foo: "bar" }, { sub: "42", exp })],
    ["b64 false", sign({ alg: "HS256", b64: false, crit: ["b64"] }, { sub: "42", exp })],
    ["another typ", sign({ alg: "HS256", typ: "at+jwt" }, { sub: "42", exp })],
    ["a numeric kid", sign({ alg: "HS256", kid: 1 }, { sub: "42", exp })],
    ["a wrong signature", `${header}.${payload}.${"A".repeat(43)}`],
    ["another secret", sign({ alg: "HS256" }, { sub: "42", exp }, "sha256", "another-secret-of-length")],
    [
      "a tampered payload",
      `${header}.${Buffer.from(JSON.stringify({ sub: "1", exp })).toString("base64url")}.${sign({ alg: "HS256" }, { sub: "42", exp }).split(".")[2]}`,
    ],
    ["no exp", sign({ alg: "HS256" }, { sub: "42" })],
    ["a past exp", sign({ alg: "HS256" }, { sub: "42", exp: now() - 3600 })],
    ["a string exp", sign({ alg: "HS256" }, { sub: "42", exp: String(exp) })],
    ["no sub", sign({ alg: "HS256" }, { exp })],
    ["sub with a leading zero", sign({ alg: "HS256" }, { sub: "042", exp })],
    ["sub not a number", sign({ alg: "HS256" }, { sub: "alice", exp })],
    ["sub negative", sign({ alg: "HS256" }, { sub: "-1", exp })],
    ["sub as a JSON number", sign({ alg: "HS256" }, { sub: 42, exp })],
    ["sub past bigint", sign({ alg: "HS256" }, { sub: "9223372036854775808", exp })],
    ["an nbf in the future", sign({ alg: "HS256" }, { sub: "42", exp, nbf: now() + 3600 })],
    ["a string iat", sign({ alg: "HS256" }, { sub: "42", exp, iat: "yesterday" })],
    [
      "a payload that is a JSON array",
      `${header}.${Buffer.from("[1]").toString("base64url")}.${createHmac("sha256", secret)
        .update(`${header}.${Buffer.from("[1]").toString("base64url")}`)
        .digest("base64url")}`,
    ],
    ["a signature with a character outside base64url", `${sign({ alg: "HS256" }, { sub: "42", exp })}=`],
    ["two parts", `${header}.${payload}`],
    ["not a JWT", "hello"],
  ])("when a token has %s, then it names nobody", async (_, token) => {
    expect(await service().verify(token)).toBeNull();
  });
});
