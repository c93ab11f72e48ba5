// Views of posts counted in Redis (scripts/record-views.lua): one script call per
// post per flush of a process's aggregated views, each under a deadline
// (write-deadline.ts), so a flush that failed is retried only once it can no
// longer apply.
import type { ViewStore } from "../../domain/ports/index.js";
import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";
import { ScriptStatus, toError } from "./statuses.js";
import { commandTimeoutOf, settledOnFailure, writeDeadline, WriteDeadlinePassedError } from "./write-deadline.js";
import { redisClockOf } from "./redis-clock.js";

export function createViewStore(redis: RedisClient, keys: RedisKeys): ViewStore {
  const timeoutMs = commandTimeoutOf(redis);
  const clock = redisClockOf(redis);
  return {
    async add(target, count, flush) {
      const flushes = keys.viewFlushes(target, flush.sender);
      const deadline = writeDeadline(timeoutMs, clock);
      const call = redis.recordViews(keys.counters(target), keys.outbox(target), flushes, count, target.type, target.id.toString(), flush.seq, deadline.atMs);
      const [status, views] = await settledOnFailure(deadline, call);
      switch (status) {
        case ScriptStatus.Applied:
        case ScriptStatus.Unchanged:
          return { kind: "counted", views: Number(views) };
        case ScriptStatus.TargetAbsent:
          return { kind: "unloaded" };
        case ScriptStatus.DeadlinePassed:
          throw new WriteDeadlinePassedError("record-views");
        default:
          throw toError("record-views", status, target);
      }
    },
  };
}
