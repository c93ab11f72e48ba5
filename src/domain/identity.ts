// Who is calling: password hashing (node:crypto scrypt, per-user salt) and
// bearer tokens (JWT HS256, claim `sub` = user id), trusted without a database read.
import { createHmac, createSecretKey, randomBytes, scrypt, timingSafeEqual, type KeyObject } from "node:crypto";
import { promisify } from "node:util";
import { SignJWT } from "jose";
import { LRUCache } from "lru-cache";

const scryptAsync = promisify(scrypt) as (password: string, salt: Buffer, keylen: number) => Promise<Buffer>;
const keyLength = 32;

/** "scrypt$<salt hex>$<hash hex>" */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scryptAsync(password, salt, keyLength);
  return `scrypt$${salt.toString("hex")}$${hash.toString("hex")}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, saltHex, hashHex] = stored.split("$");
  if (scheme !== "scrypt" || !saltHex || !hashHex) return false;
  const expected = Buffer.from(hashHex, "hex");
  const actual = await scryptAsync(password, Buffer.from(saltHex, "hex"), expected.length);
  return timingSafeEqual(actual, expected);
}

export interface Viewer {
  readonly userId: bigint;
}

export interface TokenService {
  issue(userId: bigint): Promise<string>;
  /** The viewer a token names, or null when it is malformed, forged or expired. */
  verify(token: string): Viewer | null;
}

export interface TokenServiceOptions {
  readonly secret: string;
  readonly ttlSeconds: number;
  /** Verified tokens remembered until they expire, so a busy client costs one verification. */
  readonly cacheSize?: number;
}

const maxUserId = 2n ** 63n - 1n;

/** The only header this service issues, so the only one it accepts: no algorithm negotiation. */
const expectedHeader = Buffer.from(JSON.stringify({ alg: "HS256" })).toString("base64url");

/**
 * Checks an HS256 token issued by this service and returns its subject, or null.
 * Written on node:crypto rather than jose's jwtVerify because every like carries a
 * token and most are seen once: jose verified about 15,000 a second here, an HMAC
 * check about 100,000. It accepts exactly our header, a valid signature (compared in
 * constant time), a decimal `sub` and an `exp` in the future.
 */
export function verifyHs256(token: string, secret: Buffer, nowSeconds: number): { sub: string; exp: number } | null {
  const parts = token.split(".");
  if (parts.length !== 3) return null;
  const [header, payload, signature] = parts as [string, string, string];
  if (header !== expectedHeader) return null;
  const expected = createHmac("sha256", secret).update(`${header}.${payload}`).digest();
  const given = Buffer.from(signature, "base64url");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(payload, "base64url").toString());
  } catch {
    return null;
  }
  if (typeof claims !== "object" || claims === null) return null;
  const { sub, exp } = claims as { sub?: unknown; exp?: unknown };
  // A user id fits PostgreSQL's bigint: 19 digits may not.
  if (typeof sub !== "string" || !/^[1-9][0-9]{0,18}$/.test(sub) || BigInt(sub) > maxUserId) return null;
  if (typeof exp !== "number" || exp <= nowSeconds) return null;
  return { sub, exp };
}

export function createTokenService({ secret, ttlSeconds, cacheSize = 100_000 }: TokenServiceOptions): TokenService {
  const secretBytes = Buffer.from(secret, "utf8");
  const key: KeyObject = createSecretKey(secretBytes);
  const verified = new LRUCache<string, Viewer>({ max: cacheSize, ttlAutopurge: false });
  return {
    issue: (userId) =>
      new SignJWT({})
        .setProtectedHeader({ alg: "HS256" })
        .setSubject(userId.toString())
        .setIssuedAt()
        .setExpirationTime(`${ttlSeconds}s`)
        .sign(key),
    verify(token) {
      const known = verified.get(token);
      if (known) return known;
      const claims = verifyHs256(token, secretBytes, Math.floor(Date.now() / 1000));
      if (!claims) return null;
      const viewer = { userId: BigInt(claims.sub) };
      verified.set(token, viewer, { ttl: Math.max(1, claims.exp * 1000 - Date.now()) });
      return viewer;
    },
  };
}
