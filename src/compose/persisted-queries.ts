// The persisted queries of PERSISTED_QUERIES: a store in the service's Redis for
// automatic persisted queries, or a manifest's operations as the safelist.
import { readFileSync } from "node:fs";
import type { Logger } from "pino";
import type { Config } from "../config.js";
import { parseManifest, type PersistedQueries } from "../graphql/persisted-queries.js";
import type { RedisClient } from "../stores/redis/client.js";
import { createRedisKeys } from "../stores/redis/keys.js";
import { createPersistedQueryStore } from "../stores/redis/persisted-query-store.js";

/** How often a process says that Redis could not keep or give persisted queries, at most. */
const failureLogEveryMs = 60_000;

export function composePersistedQueries(config: Config, redis: RedisClient, logger: Logger): PersistedQueries {
  const { mode, manifest, ttlSeconds, maxEntries } = config.persistedQueries;
  if (mode === "off") return { mode };
  if (mode === "safelist") {
    // The config refuses safelist without a manifest; a manifest that cannot be read stops the start.
    const path = manifest as string;
    try {
      return { mode, operations: parseManifest(readFileSync(path, "utf8")) };
    } catch (error) {
      throw new Error(`PERSISTED_QUERIES_MANIFEST ${path}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
  }
  let loggedAt = Number.NEGATIVE_INFINITY;
  const onFailure = (err: unknown) => {
    if (performance.now() - loggedAt < failureLogEveryMs) return;
    loggedAt = performance.now();
    logger.warn({ err }, "persisted queries could not be read from or kept in Redis; clients send those queries' text meanwhile");
  };
  return { mode, store: createPersistedQueryStore(redis, createRedisKeys(config.redisPartitions), { ttlSeconds, maxEntries, onFailure }) };
}
