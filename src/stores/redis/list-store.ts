// Users' lists of liked and collected posts: the newest entries in Redis
// (scripts/apply-list-changes.lua keeps them, scripts/load-list.lua loads them
// from PostgreSQL), in the user's slot.
import { acquireLock } from "./lease-store.js";
import { listCapacity, type ListPosition } from "../../domain/model/index.js";
import type { ListChanges, ListStore, RecentChange } from "../../domain/ports/index.js";
import { pipelineReplies, type RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";
import { perNode } from "./per-node.js";
import { ScriptStatus, toError } from "./statuses.js";
import { splitVersion } from "../versions.js";
import { commandTimeoutOf, settledOnFailure, writeDeadline, WriteDeadlinePassedError } from "./write-deadline.js";
import { redisClockOf } from "./redis-clock.js";

const positionText = (p: ListPosition) => `${p.at.getTime()}:${p.targetId}`;

export function parsePosition(text: string): ListPosition | null {
  const match = /^(\d+):([1-9]\d*)$/.exec(text);
  return match ? { at: new Date(Number(match[1])), targetId: BigInt(match[2] as string) } : null;
}

/** Records are 'epoch:micros:state:ms[:committed]' under post ids (scripts/apply-list-changes.lua); other fields are bookkeeping. */
function parseRecords(recent: Record<string, string>): Map<bigint, RecentChange> {
  const records = new Map<bigint, RecentChange>();
  for (const [id, record] of Object.entries(recent)) {
    const match = /^\d+:\d+:([01]):(\d+)/.exec(record);
    if (match && /^[1-9]\d*$/.test(id)) records.set(BigInt(id), { member: match[1] === "1", at: new Date(Number(match[2])) });
  }
  return records;
}

export function createListStore(redis: RedisClient, keys: RedisKeys): ListStore {
  const timeoutMs = commandTimeoutOf(redis);
  const clock = redisClockOf(redis);
  const keysOf = (l: ListChanges) => {
    const list = keys.list(l.relation, l.userId);
    return [list.entries, list.horizon, list.recent];
  };

  /** Applies changes to many lists, one call per node; whether Redis holds each list. */
  async function applyLists(lists: readonly ListChanges[], committed: boolean): Promise<boolean[]> {
    const held = new Map<ListChanges, boolean>();
    await perNode(redis, lists, keysOf, async (group, { declared, named }) => {
      const deadline = writeDeadline(timeoutMs, clock);
      const args: (string | number)[] = [declared.length, ...declared, listCapacity, committed ? "1" : "0", deadline.atMs, group.length];
      for (const l of group) args.push(l.changes.length);
      for (const l of group) {
        for (const c of l.changes) {
          const { epoch, micros } = splitVersion(c.version);
          args.push(c.targetId.toString(), c.member ? "1" : "0", epoch.toString(), micros.toString(), c.at.getTime());
        }
      }
      args.push(...named);
      const [status, marks] = await settledOnFailure(deadline, redis.applyListChanges(...(args as [number, ...(string | number)[]])));
      if (status === ScriptStatus.DeadlinePassed) throw new WriteDeadlinePassedError("apply-list-changes");
      if (status !== ScriptStatus.Applied) throw toError("apply-list-changes", status, { type: "user", id: (group[0] as ListChanges).userId });
      group.forEach((l, k) => held.set(l, marks?.[k] === "1"));
    });
    return lists.map((l) => held.get(l) ?? false);
  }

  return {
    async apply(relation, userId, changes, committed) {
      if (changes.length === 0) return true;
      const [held] = await applyLists([{ relation, userId, changes }], committed);
      return held as boolean;
    },
    async applyCommitted(lists) {
      await applyLists(
        lists.filter((l) => l.changes.length > 0),
        true,
      );
    },
    async read(relation, userId) {
      const list = keys.list(relation, userId);
      // One script in the user's slot: it answers only a list loaded in its node's replication history,
      // and keeps it a day longer, as a write does (scripts/read-list.lua).
      const [status, flat = [], horizon = "", fields = []] = await redis.readList(list.entries, list.horizon, list.recent);
      if (status === ScriptStatus.Unchanged) return null;
      if (status !== ScriptStatus.Applied) throw toError("read-list", status, { type: "user", id: userId });
      const recent: Record<string, string> = {};
      for (let i = 0; i + 1 < fields.length; i += 2) recent[fields[i] as string] = fields[i + 1] as string;
      const entries: ListPosition[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) entries.push({ targetId: BigInt(flat[i] as string), at: new Date(Number(flat[i + 1])) });
      entries.sort((a, b) => b.at.getTime() - a.at.getTime() || (a.targetId < b.targetId ? 1 : a.targetId > b.targetId ? -1 : 0));
      return { entries, horizon: horizon === "" ? null : parsePosition(horizon), recent: parseRecords(recent) };
    },
    async recent(relation, userId) {
      return parseRecords(await redis.hgetall(keys.list(relation, userId).recent));
    },
    lock: (relation, userId, ttlMs) => acquireLock(redis, keys.list(relation, userId).lock, ttlMs),
    async unlock(relation, userId, token) {
      await redis.releaseLock(keys.list(relation, userId).lock, token);
    },
    async begin(relation, userId) {
      const list = keys.list(relation, userId);
      await pipelineReplies(redis.pipeline().set(list.horizon, "loading").del(list.entries).exec());
    },
    async finish(relation, userId, entries, horizon) {
      const list = keys.list(relation, userId);
      const [status] = await redis.loadList(
        list.entries,
        list.horizon,
        list.recent,
        listCapacity,
        horizon ? positionText(horizon) : "",
        ...entries.flatMap((e) => [e.targetId.toString(), e.at.getTime()]),
      );
      if (status !== ScriptStatus.Applied && status !== ScriptStatus.Unchanged) throw toError("load-list", status, { type: "user", id: userId });
    },
  };
}
