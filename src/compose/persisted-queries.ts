// The persisted queries of PERSISTED_QUERIES: a store in the service's Redis for
// automatic persisted queries, or a manifest's operations as the safelist.
import { readFileSync } from "node:fs";
import type { Logger } from "pino";
import type { Config } from "../config.js";
import { parseManifest, type PersistedQueries } from "../graphql/persisted-queries.js";
import { StartRefusal } from "../process/refusal.js";
import type { RedisClient } from "../stores/redis/client.js";
import { createRedisKeys } from "../stores/redis/keys.js";
import { createPersistedQueryStore } from "../stores/redis/persisted-query-store.js";

/** How often a process says that Redis could not keep or give persisted queries, at most. */
const failureLogEveryMs = 60_000;

/**
 * Reads what PERSISTED_QUERIES needs before any store is opened, so that a manifest
 * that cannot be read refuses the start (it would fail again on every restart), and
 * answers what makes the persisted queries once Redis is open.
 */
export function preparePersistedQueries(config: Config): (redis: RedisClient, logger: Logger) => PersistedQueries {
  const { mode, manifest, ttlSeconds, maxEntries } = config.persistedQueries;
  if (mode === "off") return () => ({ mode });
  if (mode === "safelist") {
    let operations: ReadonlyMap<string, string>;
    try {
      operations = parseManifest(readFileSync(manifest ?? "", "utf8"));
    } catch (error) {
      throw new StartRefusal(
        `PERSISTED_QUERIES_MANIFEST (${manifest ?? "unset"}) cannot be used: ${error instanceof Error ? error.message : String(error)}. ` +
          "Point it at the app's Apollo persisted query manifest, or set PERSISTED_QUERIES=apq.",
      );
    }
    return () => ({ mode, operations });
  }
  return (redis, logger) => {
    let loggedAt = Number.NEGATIVE_INFINITY;
    const onFailure = (err: unknown) => {
      if (performance.now() - loggedAt < failureLogEveryMs) return;
      loggedAt = performance.now();
      logger.warn({ err }, "persisted queries could not be read from or kept in Redis; clients send those queries' text meanwhile");
    };
    return { mode, store: createPersistedQueryStore(redis, createRedisKeys(config.redisPartitions), { ttlSeconds, maxEntries, onFailure }) };
  };
}
