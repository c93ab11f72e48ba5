import { randomUUID } from "node:crypto";
import type { Lease, TickClaims } from "../../domain/ports.js";
import type { RedisClient } from "./client.js";

/** A lock in one Redis key that several processes share (`SET NX PX`, released only by its holder). */
export function createLease(redis: RedisClient, key: string): Lease {
  return {
    async acquire(ttlMs) {
      const token = randomUUID();
      return (await redis.set(key, token, "PX", ttlMs, "NX")) === "OK" ? token : null;
    },
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
