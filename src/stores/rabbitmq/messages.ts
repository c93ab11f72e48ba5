// Every message this service puts on RabbitMQ: its JSON schema, its conversion
// from and to the model, and the one parse helper consumers use. Ids travel as
// decimal strings (JSON has no 64-bit integers).
import { z } from "zod";
import type { LikeChange, OutboxEntry, Repair } from "../../domain/model.js";
import type { Delivery } from "../../domain/ports.js";

/** A database id: a positive decimal that fits a bigint column. */
const id = z.string().regex(/^[1-9][0-9]{0,18}$/, "a positive decimal id");
/** A change version: microseconds of the Redis clock, or 0. */
const version = z.string().regex(/^[0-9]{1,19}$/, "a decimal version");
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

/**
 * A message body (a Buffer or string of JSON, or JSON rabbitmq-client already
 * decoded) read with `schema` and turned into the model, or the reason it cannot be.
 */
export function parseMessage<S extends z.ZodType, T>(schema: S, convert: (message: z.infer<S>) => T, body: unknown): Delivery<T> {
  let value = body;
  if (typeof body === "string" || Buffer.isBuffer(body)) {
    try {
      value = JSON.parse(body.toString());
    } catch {
      return { kind: "invalid", reason: "body is not JSON" };
    }
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    return { kind: "invalid", reason: parsed.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; ") };
  }
  return { kind: "valid", value: convert(parsed.data) };
}

export const parseLikeChange = (body: unknown) => parseMessage(likeChangeMessage, fromLikeChangeMessage, body);
export const parseRepair = (body: unknown) => parseMessage(repairMessage, fromRepairMessage, body);
