import { randomUUID } from "node:crypto";
import type { Lease, TickClaims } from "../../domain/ports/index.js";
import type { RedisClient } from "./client.js";

/**
 * Takes the lock in `key` for `ttlMs` under `token` (a new one unless given), or
 * answers null when another holds it. `SET NX GET` answers what the key held: a
 * call that ioredis re-sends after losing its reply finds its own token there and
 * knows it holds the lock, where a plain `SET NX` would answer "taken" and leave
 * the lock held by nobody until it expired. So does a later call with the token
 * of an acquire whose answer never came (a timeout: Redis may have taken it).
 */
export async function acquireLock(redis: RedisClient, key: string, ttlMs: number, token: string = randomUUID()): Promise<string | null> {
  const found = await redis.set(key, token, "PX", ttlMs, "NX", "GET");
  return found === null || found === token ? token : null;
}

/** A lock in one Redis key that several processes share (`acquireLock`, released only by its holder). */
export function createLease(redis: RedisClient, key: string): Lease {
  return {
    acquire: (ttlMs) => acquireLock(redis, key, ttlMs),
    async release(token) {
      await redis.releaseLock(key, token);
    },
  };
}

/**
 * Claims of ticks in keys `<prefix><tick in ms>` (`SET NX`), kept for `keepMs`: longer than
 * the clocks of the claimants can differ, so that a late one still finds the tick taken.
 * A key holds its claimant's id, so a claim that ioredis resends after losing its reply
 * finds its own id there and still counts as claimed: else no worker would run the tick.
 */
export function createTickClaims(redis: RedisClient, prefix: string, keepMs: number, claimant: string = randomUUID()): TickClaims {
  return {
    async claim(tick) {
      const key = `${prefix}${tick.getTime()}`;
      if ((await redis.set(key, claimant, "PX", keepMs, "NX")) === "OK") return true;
      return (await redis.get(key)) === claimant;
    },
  };
}
