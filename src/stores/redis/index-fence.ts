// The writers' fence over member indexes (scripts/includes/member-index.lua). A
// complete index answers "not a member" without the target's shards, so it must
// hold every membership: each like notes its target in it. A version that notes
// another way (another key, another rule) would leave an index another version
// completed without its likes, for good, were both to run at once, as in a rolling
// update. So every process that writes registers in Redis with its version's
// protocol (memberIndexProtocol) and renews a lease, and:
// - an index completes only while every live writer is of the completing process's
//   protocol (complete-member-index.lua), so none completes while versions overlap,
//   and none is read meanwhile (open() is false);
// - a process of a protocol not among those running moves the fence's generation,
//   which every index's completion mark carries: what any version completed before
//   answers nothing after, and is loaded again from PostgreSQL once one protocol runs.
//   It waits a renewal before serving, so every process has learned the generation.
// A process that could not renew within its lease cannot tell who writes: its
// indexes answer nothing until it renews.
import { performance } from "node:perf_hooks";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Cluster } from "ioredis";
import type { RedisClient } from "./client.js";
import { ScriptReplyError, ScriptStatus } from "./statuses.js";

/**
 * How this version notes memberships in member indexes. Raise it with any change to
 * what add-member, replay-change, note-members or the indexes' keys write: versions of
 * different protocols then never trust each other's indexes.
 */
export const memberIndexProtocol = 1;

export interface IndexFence {
  /** The generation indexes complete and are read under, as last renewed. */
  generation(): number;
  /** Whether member indexes may answer and load: one protocol writes, as renewed within the lease. */
  open(): boolean;
  /** Leaves the registry (the process stops writing). */
  close(): Promise<void>;
}

export interface IndexFenceOptions {
  readonly protocol?: number;
  /** How long this process counts as writing without renewing; default 15 s. */
  readonly leaseMs?: number;
  /** How often it renews; default 5 s. */
  readonly renewMs?: number;
  /** Told when writers of several protocols run, or no longer do. */
  readonly onMixed?: (mixed: boolean) => void;
  readonly onFailure?: (error: unknown) => void;
}

const fences = new WeakMap<RedisClient, IndexFence>();

/** The fence started on `redis`'s Redis, or null when none was (a cluster keeps no indexes; a test may start none). */
export const fenceOf = (redis: RedisClient): IndexFence | null => fences.get(redis) ?? null;

/**
 * Registers this process as a writer and renews its lease in the background; resolves once
 * it may write (after a renewal more when it moved the generation while others run). Null
 * on a cluster, which keeps no member indexes.
 */
export async function startIndexFence(redis: RedisClient, writers: string, options: IndexFenceOptions = {}): Promise<IndexFence | null> {
  if (redis instanceof Cluster) return null;
  const protocol = options.protocol ?? memberIndexProtocol;
  const leaseMs = options.leaseMs ?? 15_000;
  const renewMs = options.renewMs ?? 5_000;
  const id = randomUUID();
  let generation = 0;
  let mixed = false;
  let renewedAt = Number.NEGATIVE_INFINITY;
  let closed = false;

  async function renew(leaving: 0 | 1 = 0): Promise<boolean> {
    const startedAt = performance.now();
    const [status, nowGeneration, nowMixed, moved] = await redis.registerWriter(writers, id, protocol, leaseMs, leaving);
    if (status !== ScriptStatus.Applied) throw new ScriptReplyError("register-writer", status, "the writers' registry");
    generation = nowGeneration ?? 0;
    if ((nowMixed === 1) !== mixed) options.onMixed?.(nowMixed === 1);
    mixed = nowMixed === 1;
    renewedAt = startedAt;
    return moved === 1;
  }

  const moved = await renew();
  const timer = setInterval(() => {
    renew().catch((error: unknown) => options.onFailure?.(error));
  }, renewMs);
  timer.unref();
  // The others learn the new generation at their next renewal: until then they would read indexes this process does not note the old way.
  if (moved) await sleep(renewMs + 1_000);
  const fence: IndexFence = {
    generation: () => generation,
    open: () => !mixed && !closed && performance.now() - renewedAt < leaseMs,
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      fences.delete(redis);
      await renew(1).catch(() => {});
    },
  };
  fences.set(redis, fence);
  return fence;
}
