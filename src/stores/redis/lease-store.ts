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
 */
export function createTickClaims(redis: RedisClient, prefix: string, keepMs: number): TickClaims {
  return {
    async claim(tick) {
      return (await redis.set(`${prefix}${tick.getTime()}`, "1", "PX", keepMs, "NX")) === "OK";
    },
  };
}
