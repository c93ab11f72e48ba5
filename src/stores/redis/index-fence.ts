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
//   It waits before serving until every running process has learned the generation
//   (at its next renewal), a lease at most: one that has not renewed by then reads no index.
// - when a protocol leaves, or a new one takes over, no index completes for 10 s:
//   what the versions before acknowledged last reaches PostgreSQL, which loads read.
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
  /** The protocol this process writes by (memberIndexProtocol, unless a test says otherwise). */
  readonly protocol: number;
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
  /** How long after a version leaves no index completes, for its last likes to reach PostgreSQL; default 10 s. */
  readonly quietMs?: number;
  /** Told when writers of several protocols run, or no longer do. */
  readonly onMixed?: (mixed: boolean) => void;
  readonly onFailure?: (error: unknown) => void;
}

const fences = new WeakMap<RedisClient, IndexFence>();

/** The fence started on `redis`'s Redis (closed once its process stops), or null when none was (a cluster keeps no indexes; a test may start none). */
export const fenceOf = (redis: RedisClient): IndexFence | null => fences.get(redis) ?? null;

/**
 * Registers this process as a writer and renews its lease in the background; resolves once
 * it may write: when it moved the generation while others run, once each has learned it (a
 * lease at most). Null on a cluster, which keeps no member indexes.
 */
export async function startIndexFence(redis: RedisClient, writers: string, options: IndexFenceOptions = {}): Promise<IndexFence | null> {
  if (redis instanceof Cluster) return null;
  const protocol = options.protocol ?? memberIndexProtocol;
  const leaseMs = options.leaseMs ?? 15_000;
  const renewMs = options.renewMs ?? 5_000;
  const quietMs = options.quietMs ?? 10_000;
  const id = randomUUID();
  let generation = 0;
  let mixed = false;
  let renewedAt = Number.NEGATIVE_INFINITY;
  let closed = false;

  async function renew(mode: "renew" | "leave" | "ask" = "renew"): Promise<number> {
    const startedAt = performance.now();
    const [status, nowGeneration, nowMixed, last] = await redis.registerWriter(writers, id, protocol, leaseMs, mode, quietMs);
    if (status !== ScriptStatus.Applied) throw new ScriptReplyError("register-writer", status, "the writers' registry");
    generation = nowGeneration ?? 0;
    if ((nowMixed === 1) !== mixed) options.onMixed?.(nowMixed === 1);
    mixed = nowMixed === 1;
    if (mode === "renew") renewedAt = startedAt;
    return last ?? 0;
  }

  const moved = (await renew()) === 1;
  const timer = setInterval(() => {
    renew().catch((error: unknown) => options.onFailure?.(error));
  }, renewMs);
  timer.unref();
  // Each running process learns the new generation at its next renewal, or reads no index once its
  // lease runs out without one: until then it might read indexes this process does not note its way.
  const until = performance.now() + leaseMs + 1_000;
  while (moved && performance.now() < until && (await renew("ask")) > 0) await sleep(200);
  const fence: IndexFence = {
    protocol,
    generation: () => generation,
    open: () => !mixed && !closed && performance.now() - renewedAt < leaseMs,
    async close() {
      if (closed) return;
      // Kept as this client's fence, closed: its indexes answer nothing from now on.
      closed = true;
      clearInterval(timer);
      await renew("leave").catch(() => {});
    },
  };
  fences.set(redis, fence);
  return fence;
}
