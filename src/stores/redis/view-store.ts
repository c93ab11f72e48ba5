// Views of posts counted in Redis (scripts/record-views.lua): one script call per
// post per flush of a process's aggregated views.
import type { ViewStore } from "../../domain/ports.js";
import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";
import { ScriptStatus, toError } from "./statuses.js";

export function createViewStore(redis: RedisClient, keys: RedisKeys): ViewStore {
  return {
    async add(target, count, flush) {
      const flushes = keys.viewFlushes(target, flush.sender);
      const [status, views] = await redis.recordViews(keys.counters(target), keys.outbox(target), flushes, count, target.type, target.id.toString(), flush.seq);
      switch (status) {
        case ScriptStatus.Applied:
        case ScriptStatus.Unchanged:
          return { kind: "counted", views: Number(views) };
        case ScriptStatus.TargetAbsent:
          return { kind: "unloaded" };
        default:
          throw toError("record-views", status, target);
      }
    },
  };
}
