// One script call per Redis node over many keys, for the pipeline's work per
// batch (mirrored counters, users' lists, outbox lengths): a call per key costs
// the client a command object, an encoding and a reply each, which was most of
// the pipeline's CPU per like.
//
// On a standalone Redis every key is declared. On a cluster a call declares its
// first key only, which routes it to that key's node, and names the others, of
// other slots on the same node, after its arguments: a node refuses a call whose
// declared keys span slots, but lets a script flagged allow-cross-slot-keys use
// any key of the slots it serves (scripts/read-targets.lua does the same).
import calculateSlot from "cluster-key-slot";
import { Cluster } from "ioredis";
import type { RedisClient } from "./client.js";

/** The keys of one call: those to declare, and those to name after the arguments. */
export interface KeysOfCall {
  readonly declared: readonly string[];
  readonly named: readonly string[];
}

/** On a cluster, the node serving a key as the client believes. */
export const nodeBySlotMap = (cluster: Cluster, key: string) => cluster.slots[calculateSlot(key)]?.[0] ?? "";

/** A node refused a key of a slot it does not serve: the client's slot map is out of date. */
export const slotsMoved = (error: unknown) => error instanceof Error && /Script attempted to access (a non local key|a slot not served)/.test(error.message);

/**
 * Calls `call` once per node with the items whose keys it serves (all of them on
 * a standalone Redis); an item's keys share its slot, the first routes it.
 * When a cluster's slots moved under the call, that node's items are called
 * again one by one, each routed by its own key: the scripts called this way are
 * safe to repeat (they read, acknowledge, or take values guarded by sequence
 * numbers or versions), so what the refused call did before the refusal is
 * done again harmlessly.
 */
export async function perNode<T, R>(
  redis: RedisClient,
  items: readonly T[],
  keysOf: (item: T) => readonly string[],
  call: (group: readonly T[], keys: KeysOfCall) => Promise<R>,
): Promise<R[]> {
  if (items.length === 0) return [];
  if (!(redis instanceof Cluster)) return [await call(items, { declared: items.flatMap(keysOf), named: [] })];
  const byNode = new Map<string, T[]>();
  for (const item of items) {
    const node = nodeBySlotMap(redis, keysOf(item)[0] as string);
    const group = byNode.get(node);
    if (group) group.push(item);
    else byNode.set(node, [item]);
  }
  const replies = await Promise.all(
    [...byNode.values()].map(async (group) => {
      const [first, ...rest] = group.flatMap(keysOf);
      try {
        return [await call(group, { declared: [first as string], named: rest })];
      } catch (error) {
        if (!slotsMoved(error)) throw error;
        return Promise.all(group.map((item) => call([item], { declared: keysOf(item), named: [] })));
      }
    }),
  );
  return replies.flat();
}
