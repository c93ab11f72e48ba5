// Every message this service puts on RabbitMQ: its JSON schema, its conversion
// from and to the model, and the one parse helper consumers use. Ids travel as
// decimal strings (JSON has no 64-bit integers).
import { z } from "zod";
import type { LikeChange, OutboxEntry, Repair } from "../../domain/model.js";
import type { Delivery } from "../../domain/ports.js";

/** A database id: a positive decimal that fits a bigint column. */
const id = z.string().regex(/^[1-9][0-9]{0,18}$/, "a positive decimal id");
/** A change version (src/stores/versions.ts: epoch * 10^16 + microseconds), or 0. */
const version = z.string().regex(/^[0-9]{1,38}$/, "a decimal version");
const target = z.object({ type: z.enum(["post", "comment"]), id });

export const likeChangeMessage = z.object({
  eventId: z.string().min(1),
  target,
  userId: id,
  authorId: id.nullable(),
  liked: z.boolean(),
  version,
  at: z.iso.datetime(),
});

export type LikeChangeMessage = z.infer<typeof likeChangeMessage>;

/**
 * What the relay publishes: the changes of one relay round bound for one persist
 * queue, in outbox order. One message per like cost the broker and the consumers
 * more than the like itself; a single change (the message above, which an older
 * relay publishes) is still read.
 */
export const likeChangeBatchMessage = z.object({ changes: z.array(z.unknown()).min(1) });

export type LikeChangeBatchMessage = { readonly changes: LikeChangeMessage[] };

export const repairMessage = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("alignDatabase"), target, observedVersion: version, add: z.array(id), remove: z.array(id) }),
  z.object({ kind: z.literal("recountDatabase"), target }),
  z.object({ kind: z.literal("recountRedis"), target, observedVersion: version }),
]);

export type RepairMessage = z.infer<typeof repairMessage>;

/** The id of an outbox entry's message, the same whoever publishes it: brokers and consumers may deduplicate on it. */
export const eventIdOf = (entry: OutboxEntry) => `${entry.partition}-${entry.entryId}`;

export function toLikeChangeMessage(entry: OutboxEntry): LikeChangeMessage {
  const { change } = entry;
  return {
    eventId: eventIdOf(entry),
    target: { type: change.target.type, id: change.target.id.toString() },
    userId: change.userId.toString(),
    authorId: change.authorId?.toString() ?? null,
    liked: change.liked,
    version: change.version.toString(),
    at: change.at.toISOString(),
  };
}

export function toLikeChangeBatchMessage(entries: readonly OutboxEntry[]): LikeChangeBatchMessage {
  return { changes: entries.map(toLikeChangeMessage) };
}

export function fromLikeChangeMessage(m: LikeChangeMessage): LikeChange {
  return {
    target: { type: m.target.type, id: BigInt(m.target.id) },
    userId: BigInt(m.userId),
    authorId: m.authorId === null ? null : BigInt(m.authorId),
    liked: m.liked,
    version: BigInt(m.version),
    at: new Date(m.at),
  };
}

export function toRepairMessage(repair: Repair): RepairMessage {
  const target = { type: repair.target.type, id: repair.target.id.toString() };
  switch (repair.kind) {
    case "alignDatabase":
      return { kind: repair.kind, target, observedVersion: repair.observedVersion.toString(), add: repair.add.map(String), remove: repair.remove.map(String) };
    case "recountDatabase":
      return { kind: repair.kind, target };
    case "recountRedis":
      return { kind: repair.kind, target, observedVersion: repair.observedVersion.toString() };
  }
}

export function fromRepairMessage(m: RepairMessage): Repair {
  const target = { type: m.target.type, id: BigInt(m.target.id) };
  switch (m.kind) {
    case "alignDatabase":
      return { kind: m.kind, target, observedVersion: BigInt(m.observedVersion), add: m.add.map(BigInt), remove: m.remove.map(BigInt) };
    case "recountDatabase":
      return { kind: m.kind, target };
    case "recountRedis":
      return { kind: m.kind, target, observedVersion: BigInt(m.observedVersion) };
  }
}

/** A message body as JSON: rabbitmq-client decodes JSON bodies itself, but a Buffer or string may arrive. */
function jsonOf(body: unknown): { json: unknown } | { problem: string } {
  if (typeof body !== "string" && !Buffer.isBuffer(body)) return { json: body };
  try {
    return { json: JSON.parse(body.toString()) as unknown };
  } catch {
    return { problem: "body is not JSON" };
  }
}

/**
 * A message body (a Buffer or string of JSON, or JSON rabbitmq-client already
 * decoded) read with `schema` and turned into the model, or the reason it cannot be.
 */
export function parseMessage<S extends z.ZodType, T>(schema: S, convert: (message: z.infer<S>) => T, body: unknown): Delivery<T> {
  const read = jsonOf(body);
  if ("problem" in read) return { kind: "invalid", reason: read.problem };
  const parsed = schema.safeParse(read.json);
  if (!parsed.success) {
    return { kind: "invalid", reason: parsed.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; ") };
  }
  return { kind: "valid", value: convert(parsed.data) };
}

export const parseLikeChange = (body: unknown) => parseMessage(likeChangeMessage, fromLikeChangeMessage, body);

/** One change of a message, read or refused, with its own part of the body (what goes to the dead-letter queue). */
export interface ChangeDelivery {
  readonly delivery: Delivery<LikeChange>;
  readonly body: unknown;
}

/**
 * The changes a message carries, each read on its own so one bad change does not
 * hold back the rest: a batch's changes in order, or the single change of an
 * older relay's message. A body that is neither is one refused delivery.
 */
export function parseLikeChanges(body: unknown): ChangeDelivery[] {
  const read = jsonOf(body);
  if ("problem" in read) return [{ delivery: { kind: "invalid", reason: read.problem }, body }];
  const batch = likeChangeBatchMessage.safeParse(read.json);
  if (!batch.success) return [{ delivery: parseLikeChange(read.json), body: read.json }];
  return batch.data.changes.map((change) => ({ delivery: parseLikeChange(change), body: change }));
}
export const parseRepair = (body: unknown) => parseMessage(repairMessage, fromRepairMessage, body);
