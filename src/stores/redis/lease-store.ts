import { randomUUID } from "node:crypto";
import type { Lease } from "../../domain/ports.js";
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
