// The outbox streams, one per partition, that the membership and view scripts append
// to (scripts/includes/append-event.lua writes the fields read here). Entries are
// read through the consumer group "relay"; an entry is removed only once the
// caller says the broker holds it, so a reader that dies leaves its entries
// pending for another to claim.
//
// Memory stays bounded whatever the backlog: a read or a claim returns about a
// batch over every stream together, never a batch per stream (1,024 batches
// after an outage). XREADGROUP has one COUNT for all the streams it names, so a
// read names either every stream with a small COUNT (a sweep: batch / streams,
// at least 1) or a window of the streams known to hold more, each with an equal
// share of the batch (a focused read). A stream is known to hold more when its
// last read filled its COUNT. The busy streams take turns in windows of at most
// batch / `minShare` streams: one entry from each of 1,024 streams per read would
// be fair too, but then every read and every acknowledgement touches a thousand
// streams for a thousand entries (measured about a third slower than windows).
// Sweeps run when nothing is known to be waiting (then they block in Redis: one
// command however many streams, not one per stream) and every `sweepEveryMs`
// while some streams are busy, so a partition whose entries arrive while another
// drains a backlog joins the turns within that time; the busy one cannot starve
// it. A read thus returns at most max(batch, streams) entries. Claims look at
// every stream the same way, with XAUTOCLAIM cursors.
//
// No call of the relay's connection can hang: it has no command timeout (reads
// block), so every call here carries a deadline of its own.
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Cluster } from "ioredis";
import type { MalformedOutboxEntry, OutboxEntry } from "../../domain/model/index.js";
import type { Outbox, OutboxEntryPlace, OutboxRead } from "../../domain/ports/index.js";
import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";
import { perNode } from "./per-node.js";
import { ScriptReplyError, ScriptStatus } from "./statuses.js";
import { decodeOutboxEntry } from "./outbox-entries.js";

export const relayGroup = "relay";

export interface OutboxStoreOptions {
  /** Entries a read or a claim returns at most, over every stream together (or one per stream when there are more streams). */
  readonly batchSize: number;
  /** How long a read waits in Redis for new entries when none are known to wait, in milliseconds. */
  readonly blockMs?: number;
  /** How long a call may take beyond its blocking before it fails, in milliseconds. */
  readonly timeoutMs?: number;
  /**
   * While some streams are busy, how often a read still looks at every stream, in milliseconds: how long a
   * partition whose entries arrive during another's backlog may wait for its first turn. A sweep touches every
   * stream, so at 200 ms a 200,000-entry drain ran about a fifth slower than at 1,000 ms.
   */
  readonly sweepEveryMs?: number;
}

/** An entry as Redis returns it; fields are null when the entry was deleted while pending. */
type RawEntry = [id: string, fields: string[] | null];
type StreamReply = [key: string, entries: RawEntry[]][] | null;
type AutoClaimReply = [cursor: string, entries: RawEntry[], deleted?: string[]];

/**
 * ioredis puts every argument of a failed command on its error; an XREADGROUP
 * over 1,024 streams would log all of them. The message says enough.
 */
function concise(error: unknown): Error {
  return error instanceof Error ? Object.assign(new Error(error.message), { name: error.name }) : new Error(String(error));
}

/** `work`, or a "Command timed out" error (as ioredis words it) once `ms` have passed. */
async function within<T>(ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("Command timed out")), ms);
  });
  try {
    return await Promise.race([work, deadline]);
  } catch (err) {
    throw concise(err);
  } finally {
    clearTimeout(timer);
  }
}

/** Entries a focused read takes from each stream it names, at least (while the batch allows). */
const minShare = 50;

const shareOf = (budget: number, streams: number) => Math.max(1, Math.floor(budget / Math.max(1, streams)));

/** Where the reads stand, changed by every read and claim; a reopened outbox starts afresh. */
interface ReadState {
  /** Streams whose last read filled its COUNT (they may hold more new entries), in the order of their turns. */
  busy: string[];
  readonly isBusy: Set<string>;
  lastSweepAt: number;
  /** XAUTOCLAIM cursors of the streams whose pending entries were not all looked at yet. */
  readonly claimCursors: Map<string, string>;
}

/** What every call of the store takes: the client, the streams, the options and where the reads stand. */
interface OutboxContext {
  readonly redis: RedisClient;
  readonly keys: RedisKeys;
  readonly reader: string;
  readonly streams: readonly string[];
  readonly partitionOf: ReadonlyMap<string, number>;
  readonly blockMs: number;
  readonly timeoutMs: number;
  readonly sweepEveryMs: number;
  readonly budget: number;
  /** Streams a focused read names at most, so that each gets at least `minShare` entries. */
  readonly window: number;
  readonly state: ReadState;
}

/** A read whose entries are being decoded, stream by stream. */
interface Decoded extends OutboxRead {
  readonly entries: (OutboxEntry | MalformedOutboxEntry)[];
  readonly missing: OutboxEntryPlace[];
}

const decoded = (): Decoded => ({ entries: [], missing: [], reopened: false, more: false });

async function open({ redis, streams, timeoutMs }: OutboxContext): Promise<void> {
  await within(
    timeoutMs,
    Promise.all(
      streams.map((stream) =>
        redis.xgroup("CREATE", stream, relayGroup, "0", "MKSTREAM").catch((err: Error) => {
          if (!err.message.includes("BUSYGROUP")) throw err;
        }),
      ),
    ),
  );
}

function decodeInto({ partitionOf }: OutboxContext, read: Decoded, stream: string, raw: readonly RawEntry[]): void {
  const partition = partitionOf.get(stream) ?? -1;
  for (const [entryId, fields] of raw) {
    if (fields === null) read.missing.push({ partition, entryId });
    else read.entries.push(decodeOutboxEntry(partition, entryId, fields));
  }
}

/** New entries of `named`, at most `count` from each; blocks up to `block` ms when given. */
async function readGroup(store: OutboxContext, named: readonly string[], count: number, block: number | null): Promise<Map<string, RawEntry[]>> {
  const { redis, reader, timeoutMs } = store;
  const found = new Map<string, RawEntry[]>();
  if (redis instanceof Cluster) {
    // A cluster refuses one read over keys of many slots: one read per stream, without blocking.
    const replies = await within(
      timeoutMs,
      Promise.all(named.map((s) => redis.call("XREADGROUP", "GROUP", relayGroup, reader, "COUNT", count, "STREAMS", s, ">") as Promise<StreamReply>)),
    );
    for (const reply of replies) for (const [stream, entries] of reply ?? []) found.set(stream, entries);
    if (block !== null && found.size === 0) await sleep(Math.min(block, 200));
    return found;
  }
  const blocking = block === null ? [] : ["BLOCK", block];
  const reply = await within(
    (block ?? 0) + timeoutMs,
    redis.call("XREADGROUP", "GROUP", relayGroup, reader, "COUNT", count, ...blocking, "STREAMS", ...named, ...named.map(() => ">")) as Promise<StreamReply>,
  );
  for (const [stream, entries] of reply ?? []) found.set(stream, entries);
  return found;
}

/** Runs one command per stream: one round trip on a single server, per node in a cluster. */
async function perStream<T>({ redis, timeoutMs }: OutboxContext, commands: readonly [stream: string, args: (string | number)[]][], name: string): Promise<T[]> {
  if (commands.length === 0) return [];
  if (redis instanceof Cluster) {
    return within(timeoutMs, Promise.all(commands.map(([stream, args]) => redis.call(name, stream, ...args) as Promise<T>)));
  }
  const pipeline = redis.pipeline();
  for (const [stream, args] of commands) pipeline.call(name, stream, ...args);
  const results = (await within(timeoutMs, pipeline.exec())) ?? [];
  const failed = results.find(([error]) => error)?.[0];
  if (failed) throw concise(failed);
  return results.map(([, value]) => value as T);
}

function groupByStream(keys: RedisKeys, entries: readonly OutboxEntryPlace[]): Map<string, string[]> {
  const byStream = new Map<string, string[]>();
  for (const e of entries) {
    const stream = keys.outboxOf(e.partition);
    const ids = byStream.get(stream);
    if (ids) ids.push(e.entryId);
    else byStream.set(stream, [e.entryId]);
  }
  return byStream;
}

/** Runs `read`; when Redis lost the streams and their group (a flush, a new server), starts them again. */
async function reopening(store: OutboxContext, read: () => Promise<OutboxRead>): Promise<OutboxRead> {
  try {
    return await read();
  } catch (err) {
    if (!(err instanceof Error) || !err.message.includes("NOGROUP")) throw concise(err);
    store.state.busy = [];
    store.state.isBusy.clear();
    store.state.claimCursors.clear();
    await open(store);
    return { entries: [], missing: [], reopened: true, more: false };
  }
}

async function readNew(store: OutboxContext): Promise<OutboxRead> {
  const { state } = store;
  const sweep = state.busy.length === 0 || Date.now() - state.lastSweepAt >= store.sweepEveryMs;
  const named = sweep ? store.streams : state.busy.splice(0, store.window);
  const count = shareOf(store.budget, named.length);
  if (sweep) state.lastSweepAt = Date.now();
  const found = await readGroup(store, named, count, state.busy.length === 0 && sweep ? store.blockMs : null);
  const read = decoded();
  for (const stream of named) {
    const entries = found.get(stream) ?? [];
    decodeInto(store, read, stream, entries);
    const full = entries.length >= count;
    if (!sweep) {
      // Taken off the front for this turn: back in line while it has more.
      if (full) state.busy.push(stream);
      else state.isBusy.delete(stream);
    } else if (full && !state.isBusy.has(stream)) {
      state.busy.push(stream);
      state.isBusy.add(stream);
    } else if (!full && state.isBusy.has(stream)) {
      state.isBusy.delete(stream);
    }
  }
  if (sweep) state.busy = state.busy.filter((stream) => state.isBusy.has(stream));
  return { ...read, more: state.busy.length > 0 };
}

async function acknowledge(store: OutboxContext, entries: readonly OutboxEntryPlace[]): Promise<void> {
  const { redis } = store;
  const streams = [...groupByStream(store.keys, entries)];
  await within(
    store.timeoutMs,
    perNode(
      redis,
      streams,
      ([stream]) => [stream],
      async (group, { declared, named }) => {
        const args: string[] = [relayGroup, String(group.length)];
        for (const [, ids] of group) args.push(String(ids.length));
        for (const [, ids] of group) args.push(...ids);
        const [status] = await redis.acknowledgeOutbox(declared.length, ...declared, ...args, ...named).catch((err: unknown) => {
          throw concise(err);
        });
        if (status !== ScriptStatus.Applied) throw new ScriptReplyError("acknowledge-outbox", status, "the outbox");
      },
    ),
  );
}

async function keep(store: OutboxContext, entries: readonly OutboxEntryPlace[]): Promise<void> {
  // Claiming its own entries resets their idle time, which is what other readers' XAUTOCLAIM looks at.
  // JUSTID leaves their delivery count alone; entries deleted meanwhile simply leave the pending list.
  await perStream(
    store,
    [...groupByStream(store.keys, entries)].map(([stream, ids]) => [stream, [relayGroup, store.reader, 0, ...ids, "JUSTID"]]),
    "XCLAIM",
  );
}

async function claimAbandoned(store: OutboxContext, idleMs: number): Promise<OutboxRead> {
  const { claimCursors } = store.state;
  const named = claimCursors.size === 0 ? store.streams : [...claimCursors.keys()];
  const count = shareOf(store.budget, named.length);
  const replies = await perStream<AutoClaimReply>(
    store,
    named.map((stream) => [stream, [relayGroup, store.reader, idleMs, claimCursors.get(stream) ?? "0-0", "COUNT", count]]),
    "XAUTOCLAIM",
  );
  const read = decoded();
  named.forEach((stream, i) => {
    const [cursor, entries, deleted = []] = replies[i] as AutoClaimReply;
    if (cursor === "0-0") claimCursors.delete(stream);
    else claimCursors.set(stream, cursor);
    // Redis 7 drops deleted entries from the pending list itself and names them apart; 6.2 returns them with no fields.
    decodeInto(store, read, stream, entries);
    const partition = store.partitionOf.get(stream) ?? -1;
    for (const entryId of deleted) read.missing.push({ partition, entryId });
  });
  return { ...read, more: claimCursors.size > 0 };
}

async function length({ redis, streams, timeoutMs }: OutboxContext): Promise<number> {
  const lengths = await within(
    timeoutMs,
    perNode(
      redis,
      streams,
      (s) => [s],
      async (_, { declared, named }) => {
        const [status, entries] = await redis.outboxLength(declared.length, ...declared, ...named).catch((err: unknown) => {
          throw concise(err);
        });
        if (status !== ScriptStatus.Unchanged) throw new ScriptReplyError("outbox-length", status, "the outbox");
        return entries ?? 0;
      },
    ),
  );
  return lengths.reduce((a, b) => a + b, 0);
}

export function createOutboxStore(redis: RedisClient, keys: RedisKeys, options: OutboxStoreOptions): Outbox {
  const reader = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const streams = keys.outboxes();
  const store: OutboxContext = {
    redis,
    keys,
    reader,
    streams,
    partitionOf: new Map(streams.map((stream, partition) => [stream, partition])),
    blockMs: options.blockMs ?? 500,
    timeoutMs: options.timeoutMs ?? 5_000,
    sweepEveryMs: options.sweepEveryMs ?? 1_000,
    budget: options.batchSize,
    window: Math.max(1, Math.floor(options.batchSize / minShare)),
    state: { busy: [], isBusy: new Set(), lastSweepAt: 0, claimCursors: new Map() },
  };
  return {
    open: () => open(store),
    reader,
    read: () => reopening(store, () => readNew(store)),
    acknowledge: (entries) => acknowledge(store, entries),
    keep: (entries) => keep(store, entries),
    claimAbandoned: (idleMs) => reopening(store, () => claimAbandoned(store, idleMs)),
    length: () => length(store),
  };
}
