// The message bus (RabbitMQ) the outbox publishes to and the persist consumers read.
import type { Change, OutboxEntry, Repair } from "../model/index.js";

/** A message as a consumer receives it: read, or the reason it cannot be. */
export type Delivery<T> = { readonly kind: "valid"; readonly value: T } | { readonly kind: "invalid"; readonly reason: string };

/**
 * What becomes of a message once handled: done; parked for good (it can never be
 * applied); or applied again after a delay (it is valid, but the store refused it).
 */
export type Disposition = "ack" | { readonly deadLetter: string } | { readonly retryLater: string };

export interface Subscription {
  /** Stops taking messages and waits for those in hand. */
  close(): Promise<void>;
}

export interface ConsumeOptions {
  /** Messages of one queue handed to the handler at once, at most: the broker delivers no more until one is settled. */
  readonly concurrency: number;
  /** Called when a queue's consumer holds `concurrency` messages: nothing more arrives from it until one is settled. */
  readonly onFull?: () => void;
}

/** The persist queues of the deployment's previous routing, left holding changes no process consumes. */
export interface PreviousRouting {
  /** The number of persist queues they were routed by. */
  readonly queues: number;
  /** As MessageBus.consumeChanges, on those queues. */
  consumeChanges(options: ConsumeOptions, handle: (deliveries: readonly Delivery<Change>[]) => Promise<Disposition[]>): Subscription;
  /** Whether every one of them is empty; throws when another process consumes them too. */
  drained(): Promise<boolean>;
}

export interface MessageBus {
  /**
   * Checks, before anything is consumed or published, that this process routes
   * changes the way the deployment does (the same number of persist queues), and
   * takes over a new number only when no change can be on its way under the old one;
   * throws an error naming the fix otherwise. Answers the old routing's queues when
   * they must be drained first (then call again), null when done.
   */
  open(): Promise<PreviousRouting | null>;
  /** Publishes changes durably, in batches that keep each partition's order; resolves once the broker confirmed every one. */
  publishChanges(entries: readonly OutboxEntry[]): Promise<void>;
  /** Publishes repairs durably; resolves once the broker confirmed every one. */
  publishRepairs(repairs: readonly Repair[]): Promise<void>;
  /** Parks what can never be applied in the dead-letter queue, with the reason. */
  deadLetter(body: unknown, reason: string, origin: string): Promise<void>;
  /**
   * Hands every persist queue's changes to `handle`, a message's changes at a time,
   * each read or refused on its own; `handle` answers a disposition per change, and
   * those dead-lettered go alone. A thrown error requeues the whole message.
   */
  consumeChanges(options: ConsumeOptions, handle: (deliveries: readonly Delivery<Change>[]) => Promise<Disposition[]>): Subscription;
  consumeRepairs(options: ConsumeOptions, handle: (delivery: Delivery<Repair>) => Promise<Disposition>): Subscription;
  close(): Promise<void>;
}
