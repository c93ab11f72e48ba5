// The deployment's number of persist queues, recorded in the broker, and the one
// way it changes.
//
// The relay sends partition p to persist queue p mod PERSIST_QUEUES. Two
// processes with different values would send one partition to two queues, whose
// consumers apply its changes in parallel and out of order; and queues a lower
// value no longer consumes would keep their messages for good. So the broker
// keeps the value: a marker queue (never bound, never holding a message) whose
// x-max-length is the number. Declaring a queue again with another x-max-length
// fails (PRECONDITION_FAILED), atomically whoever tries, so:
//
// - every publisher declares the marker before anything else, on every
//   (re)connect: a process with another value cannot publish one change;
// - the pipeline calls adoptPartitioning() at start, before it consumes or
//   publishes: a process with another value refuses to start while any old
//   persist queue has consumers (a process runs with the old value). When none
//   has, nothing publishes under the old value either (every pipeline process
//   consumes), so the old value can be retired: first the changes left in its
//   queues are drained (consumed under the old routing, with the marker
//   unchanged, so no process with yet another value starts meanwhile); once
//   every old queue is empty and unused the marker is replaced (an old process
//   starting or reconnecting after that cannot publish), and the old queues the
//   new value does not use are deleted (checked empty and unused just before).
//
// Changing PERSIST_QUEUES is therefore: stop every pipeline process (likes go on;
// changes wait in the Redis outbox), start them with the new value. The first
// drains and takes over; the others refuse to start while it drains (and start
// when run again), then find the new value recorded. Refused changes waiting to
// be retried do not matter: they come back through a queue of their own.
import type { Connection } from "rabbitmq-client";
import type { Topology } from "./topology.js";

/** PERSIST_QUEUES differs from the deployment's and cannot be changed safely now. */
export class PartitioningChangeRefusedError extends Error {
  override readonly name = "PartitioningChangeRefusedError";
}

/**
 * Kept (or recorded); changed from an old number whose queues were empty and unused;
 * or not yet: the old queues are unused but hold changes, to be drained (consumed
 * under the old routing) before the number can change.
 */
export type PartitioningOutcome =
  { readonly kind: "kept" } | { readonly kind: "changed"; readonly from: number } | { readonly kind: "drain"; readonly from: number };

const codeOf = (err: unknown) => (err as { code?: unknown }).code;

/** What the broker's refusal says the recorded value is ("... received '4' but current is '2'"). */
function recordedValue(err: unknown): number | null {
  const match = /current is (?:the value )?'(\d+)'/.exec(String((err as Error).message));
  return match ? Number(match[1]) : null;
}

/** A queue's messages and consumers, or null when it does not exist. */
export async function inspect(connection: Connection, queue: string): Promise<{ messageCount: number; consumerCount: number } | null> {
  try {
    return await connection.queueDeclare({ queue, passive: true });
  } catch (err) {
    if (codeOf(err) === "NOT_FOUND") return null;
    throw err;
  }
}

/** Whether the marker could be declared with this process's value. */
async function declares(connection: Connection, topology: Topology): Promise<boolean> {
  try {
    await connection.queueDeclare(topology.partitioningMarker);
    return true;
  } catch (err) {
    if (codeOf(err) === "PRECONDITION_FAILED") return false;
    throw err;
  }
}

/**
 * Makes this process's number of persist queues the deployment's: records it when
 * none is, keeps it when equal, retires the old one when that is safe, and throws
 * PartitioningChangeRefusedError otherwise.
 */
export async function adoptPartitioning(connection: Connection, topology: Topology): Promise<PartitioningOutcome> {
  const wanted = topology.persistQueues.length;
  const marker = topology.partitioningMarker;
  try {
    await connection.queueDeclare(marker);
    return { kind: "kept" };
  } catch (err) {
    if (codeOf(err) !== "PRECONDITION_FAILED") throw err;
    const recorded = recordedValue(err);
    if (recorded === null) {
      throw new PartitioningChangeRefusedError(
        `PERSIST_QUEUES=${wanted} does not match the number of persist queues recorded in RabbitMQ (queue "${marker.queue}"), ` +
          `which could not be read: ${(err as Error).message}`,
      );
    }
    const refuse = (why: string) =>
      new PartitioningChangeRefusedError(
        `PERSIST_QUEUES=${wanted}, but this deployment's changes are routed to ${recorded} persist queues, and ${why}. ` +
          `Changing the number while changes are on their way would send a partition to two queues. Either set PERSIST_QUEUES=${recorded}, ` +
          `or stop every process that runs the pipeline (with PERSIST_QUEUES=${recorded}), then start them with the new value: the first drains the old queues and takes over.`,
      );
    const old = Array.from({ length: recorded }, (_, q) => topology.persistQueueName(q));
    const states = await Promise.all(old.map((queue) => inspect(connection, queue)));
    const inUse = old.findIndex((_, q) => (states[q]?.consumerCount ?? 0) > 0);
    if (inUse >= 0) {
      // A process with this same value may have taken over meanwhile (its consumers are what we saw).
      if (await declares(connection, topology)) return { kind: "kept" };
      throw refuse(
        `queue "${old[inUse]}" has consumers: a process still runs with PERSIST_QUEUES=${recorded}, or one with the new value is draining the old queues`,
      );
    }
    if (states.some((state) => (state?.messageCount ?? 0) > 0)) return { kind: "drain", from: recorded };
    await connection.queueDelete({ queue: marker.queue, ifUnused: true, ifEmpty: true });
    if (!(await declares(connection, topology))) throw refuse("another process just recorded a different number");
    for (let q = wanted; q < recorded; q++) {
      const queue = topology.persistQueueName(q);
      // Quorum queues refuse the if-unused and if-empty flags of a delete: the check just before
      // stands in for them. Only a publisher of the old value set up before the marker changed
      // (a process started in that same instant) could still send something here.
      const state = await inspect(connection, queue);
      if (state && (state.consumerCount > 0 || state.messageCount > 0)) {
        throw refuse(`queue "${queue}" was taken into use again while the number changed (a process with PERSIST_QUEUES=${recorded} started)`);
      }
      if (state) await connection.queueDelete({ queue });
    }
    return { kind: "changed", from: recorded };
  }
}
