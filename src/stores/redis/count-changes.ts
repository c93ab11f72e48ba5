// Hears that targets' counts changed: every script that changes a target's
// counts announces it on sharded pub/sub, on a channel named as the target's
// counter hash (scripts/includes/append-event.lua, mirror-counters.lua). Sharded
// channels live in the slot of their name, so on a cluster a message goes only to
// the node holding the target, not to every node as a plain PUBLISH would.
import type { CountChanges } from "../../domain/ports/index.js";
import type { Target } from "../../domain/model/index.js";
import { Cluster } from "ioredis";
import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";

/**
 * `subscriber` is a connection of its own (a subscribing connection takes no
 * other commands): on a cluster, one with `shardedSubscribers`. Its owner closes it.
 */
export function createCountChanges(subscriber: RedisClient, keys: RedisKeys): CountChanges {
  let handler: (target: Target | null) => void = () => {};
  subscriber.on("smessage", (channel: string) => {
    const target = keys.parseCounters(channel);
    if (target) handler(target);
  });
  // ioredis subscribes again after a reconnect; what changed while it was away was not heard,
  // so every watched post is read again (harmless when it is the first connection: nothing
  // is watched yet). On a cluster a shard's subscriber comes back on its own, without `ready`.
  const resync = () => handler(null);
  subscriber.on("ready", resync);
  subscriber.on("subscribersReady", resync);
  // One command for the channels of one partition (one slot: what a cluster requires of one SSUBSCRIBE),
  // and for all of them on a standalone Redis: a subscription of 100 posts is one command, not 100.
  const grouped = (targets: readonly Target[], command: (channels: string[]) => Promise<unknown>) => {
    const groups = new Map<number, string[]>();
    for (const target of targets) {
      const group = subscriber instanceof Cluster ? keys.partitionOf(target) : 0;
      groups.set(group, [...(groups.get(group) ?? []), keys.counters(target)]);
    }
    return Promise.all([...groups.values()].map(command)).then(() => undefined);
  };
  return {
    listen: (targets) => grouped(targets, (channels) => subscriber.ssubscribe(...channels)),
    ignore: (targets) => grouped(targets, (channels) => subscriber.sunsubscribe(...channels)),
    onChange(next) {
      handler = next;
    },
  };
}
