// New users told to every API process over sharded pub/sub, on one channel
// (keys.userAnnouncements). Pub/sub keeps nothing: a process that is not
// subscribed when a user registers never hears of them, and looks them up in
// PostgreSQL the first time their token arrives.
import { isDecimalId } from "../../domain/model/index.js";
import type { UserAnnouncements } from "../../domain/ports/index.js";
import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";

/** What an announcement carries: a user id as PostgreSQL's bigint prints it. */

/**
 * `redis` publishes; `subscriber` is the subscribing connection of an API process
 * (on a cluster, one with `shardedSubscribers`), null where nothing listens. Its
 * owner closes it.
 */
export function createUserAnnouncements(redis: RedisClient, subscriber: RedisClient | null, keys: RedisKeys): UserAnnouncements {
  const channel = keys.userAnnouncements;
  return {
    async announce(userId) {
      await redis.spublish(channel, userId.toString());
    },
    async onAnnounced(handler) {
      if (!subscriber) {
        throw new Error("Hearing new users needs a subscribing Redis connection: open the clients with { subscriber: true }.");
      }
      // The connection also carries other channels (count-changes.ts): only this one's messages are ids.
      const listener = (heard: string, message: string) => {
        if (heard === channel && isDecimalId(message)) handler(BigInt(message));
      };
      subscriber.on("smessage", listener);
      try {
        await subscriber.ssubscribe(channel);
      } catch (error) {
        subscriber.off("smessage", listener);
        throw error;
      }
      return async () => {
        subscriber.off("smessage", listener);
        await subscriber.sunsubscribe(channel);
      };
    },
  };
}
