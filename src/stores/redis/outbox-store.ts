// The outbox streams, one per partition, that the like and unlike scripts append
// to (scripts/includes/append-event.lua writes the fields read here). Entries are
// read through the consumer group "relay"; an entry is removed only once the
// caller says the broker holds it, so a reader that dies leaves its entries
// pending for another to claim.
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Cluster } from "ioredis";
import type { LikeChange, MalformedOutboxEntry, OutboxEntry } from "../../domain/model.js";
import type { Outbox, OutboxRead } from "../../domain/ports.js";
import type { RedisClient } from "./client.js";
import type { RedisKeys } from "./keys.js";
import { versionOf } from "../versions.js";

export const relayGroup = "relay";

export interface OutboxStoreOptions {
  /** Entries read per stream per read at most. */
  readonly batchSize: number;
  /** How long a read of new entries waits for some, in milliseconds. */
  readonly blockMs?: number;
}

type StreamReply = [key: string, entries: [id: string, fields: string[]][]][] | null;

const decimalId = /^[1-9][0-9]{0,18}$/;

/** An entry's fields as a change, or what is wrong with them. */
export function decodeOutboxEntry(partition: number, entryId: string, fields: readonly string[]): OutboxEntry | MalformedOutboxEntry {
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i] as string, fields[i + 1] as string);
  const type = f.get("t");
  // Entries appended before epochs existed carry no 'e': epoch 0.
  const [id, user, micros, author = "", state, ts, epoch = "0"] = ["i", "u", "v", "a", "s", "ts", "e"].map((name) => f.get(name));
  const at = new Date(Number(ts));
  const problems = [
    type === "post" || type === "comment" ? null : "t is not post or comment",
    id && decimalId.test(id) ? null : "i is not an id",
    user && decimalId.test(user) ? null : "u is not an id",
    micros && /^[0-9]{1,16}$/.test(micros) ? null : "v is not a version",
    /^[0-9]{1,18}$/.test(epoch) ? null : "e is not an epoch",
    author === "" || decimalId.test(author) ? null : "a is neither empty nor an id",
    state === "0" || state === "1" ? null : "s is not 0 or 1",
    Number.isNaN(at.getTime()) ? "ts is not a time" : null,
  ].filter((p): p is string => p !== null);
  if (problems.length > 0) {
    return { partition, entryId, problem: `outbox entry ${entryId} of partition ${partition} is malformed (${problems.join("; ")}): ${JSON.stringify(Object.fromEntries(f))}` };
  }
  const change: LikeChange = {
    target: { type: type as "post" | "comment", id: BigInt(id as string) },
    userId: BigInt(user as string),
    authorId: author === "" ? null : BigInt(author),
    liked: state === "1",
    version: versionOf(BigInt(epoch), BigInt(micros as string)),
    at,
  };
  return { partition, entryId, change };
}

/**
 * ioredis puts every argument of a failed command on its error; an XREADGROUP
 * over 1,024 streams would log all of them. The message says enough.
 */
function concise(error: unknown): Error {
  return error instanceof Error ? Object.assign(new Error(error.message), { name: error.name }) : new Error(String(error));
}

export function createOutboxStore(redis: RedisClient, keys: RedisKeys, options: OutboxStoreOptions): Outbox {
  const reader = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const streams = keys.outboxes();
  const partitionOf = new Map(streams.map((stream, partition) => [stream, partition]));
  const blockMs = options.blockMs ?? 500;

  const open = async () => {
    await Promise.all(
      streams.map((stream) =>
        redis.xgroup("CREATE", stream, relayGroup, "0", "MKSTREAM").catch((err: Error) => {
          if (!err.message.includes("BUSYGROUP")) throw concise(err);
        }),
      ),
    );
  };

  const decodeReply = (reply: StreamReply) =>
    (reply ?? []).flatMap(([stream, entries]) => {
      const partition = partitionOf.get(stream) ?? -1;
      return entries.map(([id, fields]) => decodeOutboxEntry(partition, id, fields));
    });

  async function readStreams(from: ">" | "0"): Promise<StreamReply[]> {
    if (redis instanceof Cluster) {
      // A cluster refuses one read over keys of many slots: one read per stream, without blocking.
      const replies = await Promise.all(
        streams.map((s) => redis.call("XREADGROUP", "GROUP", relayGroup, reader, "COUNT", options.batchSize, "STREAMS", s, from) as Promise<StreamReply>),
      );
      if (from === ">" && replies.every((r) => !r || r.every(([, e]) => e.length === 0))) await sleep(Math.min(blockMs, 200));
      return replies;
    }
    const block = from === ">" ? ["BLOCK", blockMs] : [];
    return [
      (await redis.call("XREADGROUP", "GROUP", relayGroup, reader, "COUNT", options.batchSize, ...block, "STREAMS", ...streams, ...streams.map(() => from))) as StreamReply,
    ];
  }

  return {
    open,
    reader,
    async read(which): Promise<OutboxRead> {
      try {
        const replies = await readStreams(which === "new" ? ">" : "0");
        return { entries: replies.flatMap(decodeReply), reopened: false };
      } catch (err) {
        if (!(err instanceof Error) || !err.message.includes("NOGROUP")) throw concise(err);
        // Redis lost the streams and their group (a flush, a new server): start them again.
        await open();
        return { entries: [], reopened: true };
      }
    },
    async acknowledge(entries) {
      const byStream = new Map<string, string[]>();
      for (const e of entries) {
        const stream = keys.outboxOf(e.partition);
        const ids = byStream.get(stream);
        if (ids) ids.push(e.entryId);
        else byStream.set(stream, [e.entryId]);
      }
      try {
        if (redis instanceof Cluster) {
          // Per stream, each on the node that holds it.
          await Promise.all(
            [...byStream].map(async ([stream, ids]) => {
              await redis.xack(stream, relayGroup, ...ids);
              await redis.xdel(stream, ...ids);
            }),
          );
          return;
        }
        // One round trip for every stream touched (a round may touch hundreds).
        const pipeline = redis.pipeline();
        for (const [stream, ids] of byStream) pipeline.xack(stream, relayGroup, ...ids).xdel(stream, ...ids);
        const failed = ((await pipeline.exec()) ?? []).find(([error]) => error)?.[0];
        if (failed) throw failed;
      } catch (err) {
        throw concise(err);
      }
    },
    async claimAbandoned(idleMs) {
      const claimed = await Promise.all(
        streams.map(async (stream) => {
          const reply = (await redis.xautoclaim(stream, relayGroup, reader, idleMs, "0-0", "COUNT", options.batchSize, "JUSTID")) as [string, string[]];
          return reply[1].length;
        }),
      ).catch((err: unknown) => {
        throw concise(err);
      });
      return claimed.reduce((a, b) => a + b, 0);
    },
    async length() {
      const lengths = await Promise.all(streams.map((s) => redis.xlen(s)));
      return lengths.reduce((a, b) => a + b, 0);
    },
  };
}
