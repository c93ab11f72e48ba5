// The last use of each post and comment Redis holds (keys.ts, tu:{p}): written when
// a target is loaded or created, moved forward by uses (never back), and removed
// with the target, so the idle time eviction goes by is real use, not any command's
// touch. Users keep none: no eviction takes them (a like credits its author's
// counters from another slot), and records of them would only stand in the way.
import type { Target } from "../../domain/model/index.js";
import type { UseRecords } from "../../domain/ports/index.js";
import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";

/** Now, as use records score it: whole seconds since the epoch. */
export const useScore = () => Math.floor(Date.now() / 1000);

/** Whether Redis keeps a use record of the target: posts and comments only. */
export const keepsUseRecord = (target: Target): boolean => target.type !== "user";

export function createUseRecords(redis: RedisClient, keys: RedisKeys): UseRecords {
  return {
    async touch(targets) {
      const byKey = new Map<string, string[]>();
      for (const target of targets.filter(keepsUseRecord)) {
        const { key, member } = keys.use(target);
        const members = byKey.get(key);
        if (members) members.push(member);
        else byKey.set(key, [member]);
      }
      const now = useScore();
      // XX: a target Redis does not hold (evicted since it was read) gets no record; GT: never back.
      await Promise.all([...byKey].map(([key, members]) => redis.zadd(key, "XX", "GT", ...members.flatMap((member) => [now, member]))));
    },
  };
}
