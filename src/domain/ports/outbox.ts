// The outbox in Redis: changes waiting to be published to the message bus.
import type { MalformedOutboxEntry, OutboxEntry } from "../model/index.js";

/** Where an outbox entry sits: enough to acknowledge it. */
export type OutboxEntryPlace = Pick<OutboxEntry, "partition" | "entryId">;

export interface OutboxRead {
  readonly entries: readonly (OutboxEntry | MalformedOutboxEntry)[];
  /**
   * Entries still pending in the group whose stream entry is gone (deleted or
   * trimmed, or a Redis restarted from an older file): nothing is left to publish.
   */
  readonly missing: readonly OutboxEntryPlace[];
  /** Redis had lost the outbox (a flush, a new server) and it was opened again. */
  readonly reopened: boolean;
  /** More entries are known to wait: read again at once rather than linger. */
  readonly more: boolean;
}

/** The changes Redis appended, waiting to be published. */
export interface Outbox {
  /** This reader's name among the readers of the outbox. */
  readonly reader: string;
  /** Prepares the outbox for reading. */
  open(): Promise<void>;
  /**
   * New entries, at most about a batch over every partition together, shared fairly
   * between the partitions that have some; waits a little when there are none.
   */
  read(): Promise<OutboxRead>;
  /** Removes entries the broker now holds, or that are gone. */
  acknowledge(entries: readonly OutboxEntryPlace[]): Promise<void>;
  /** Says this reader is still working on `entries`, so that no other reader takes them over. */
  keep(entries: readonly OutboxEntryPlace[]): Promise<void>;
  /**
   * Takes over, at most about a batch at a time, entries nobody kept for longer than
   * `idleMs`: those of a reader that stopped, or of a read whose reply was lost.
   */
  claimAbandoned(idleMs: number): Promise<OutboxRead>;
  /** Entries waiting, over every partition. */
  length(): Promise<number>;
}
