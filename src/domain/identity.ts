// Who is calling: password hashing (node:crypto scrypt, per-user salt), and the
// viewer a bearer token names (tokens.ts issues and verifies them).
import { randomBytes, scrypt, timingSafeEqual } from "node:crypto";
import { promisify } from "node:util";
import pLimit from "p-limit";
import { RateLimitedError } from "../errors.js";

const scryptAsync = promisify(scrypt) as (password: string, salt: Buffer, keylen: number) => Promise<Buffer>;
const keyLength = 32;

/**
 * Scrypt runs on libuv's thread pool (4 threads by default), which DNS lookups and
 * file reads share. Bounding password work to two at a time keeps a storm of
 * sign-ins from filling the pool: the storm queues behind itself while everything
 * else keeps its threads. Process-wide on purpose, because the pool is.
 */
const passwordWork = pLimit(2);
/**
 * Derivations that may wait for a turn. A storm spread over many addresses and
 * usernames passes every budget; past this queue (about a second of work) a
 * sign-in is refused at once, to retry, rather than waiting behind the whole storm.
 */
export const maxWaitingPasswordWork = 48;
let passwordHashesComputed = 0;

async function derive(password: string, salt: Buffer, length: number): Promise<Buffer> {
  if (passwordWork.pendingCount >= maxWaitingPasswordWork) throw new RateLimitedError(1, "sign-ins are being checked on this server at once");
  return passwordWork(() => {
    passwordHashesComputed++;
    return scryptAsync(password, salt, length);
  });
}

/** Scrypt derivations this process has run (hashing and verifying): what sign-in fairness is judged by. */
export const passwordHashCount = (): number => passwordHashesComputed;

/** "scrypt$<salt hex>$<hash hex>" */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await derive(password, salt, keyLength);
  return `scrypt$${salt.toString("hex")}$${hash.toString("hex")}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, saltHex, hashHex] = stored.split("$");
  if (scheme !== "scrypt" || !saltHex || !hashHex) return false;
  const expected = Buffer.from(hashHex, "hex");
  const actual = await derive(password, Buffer.from(saltHex, "hex"), expected.length);
  return timingSafeEqual(actual, expected);
}

export interface Viewer {
  readonly userId: bigint;
}
