import type { Counts } from "../../domain/model.js";
import type { CounterStore } from "../../domain/ports.js";
import { batchRead, type RedisClient } from "./client.js";
import { parseCounterHash } from "./counter-hash.js";
import { authorField, type RedisKeys } from "./keys.js";
import { ScriptStatus, toError } from "./statuses.js";

export function createCounterStore(redis: RedisClient, keys: RedisKeys): CounterStore {
  return {
    async read(targets) {
      const hashes = await batchRead(redis, "hgetall", targets.map((t) => [keys.counters(t)] as const));
      return hashes.map((hash): Counts | null => (Object.keys(hash).length === 0 ? null : parseCounterHash(hash).counts));
    },
    async init(target, counts, authorId) {
      const fields: (string | number)[] = Object.entries(counts).flat();
      if (authorId !== undefined) fields.push(authorField, authorId.toString());
      const [status] = await redis.initCounters(keys.counters(target), ...fields);
      if (status === ScriptStatus.Applied || status === ScriptStatus.Unchanged) return status === ScriptStatus.Applied;
      throw toError("init-counters", status, target);
    },
    async bump(target, name, delta) {
      const [status] = await redis.bumpCounter(keys.counters(target), name, delta);
      if (status === ScriptStatus.Applied || status === ScriptStatus.TargetAbsent) return status === ScriptStatus.Applied;
      throw toError("bump-counter", status, target);
    },
  };
}
