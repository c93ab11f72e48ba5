// Every message this service puts on RabbitMQ: its JSON schema, its conversion
// from and to the model, and the one parse helper consumers use. Ids travel as
// decimal strings (JSON has no 64-bit integers).
import { z } from "zod";
import {
  decimalIdSource,
  derivedCounters,
  relationNames,
  relations,
  type Change,
  type CounterName,
  type OutboxEntry,
  type Relation,
  type Repair,
  type TargetType,
} from "../../domain/model/index.js";
import type { Delivery } from "../../domain/ports/index.js";

/** A database id: a positive decimal that fits a bigint column. */
const id = z.string().regex(new RegExp(`^${decimalIdSource}$`), "a positive decimal id");
/** A change version (src/stores/versions.ts: epoch * 10^16 + microseconds), or 0. */
const version = z.string().regex(/^[0-9]{1,38}$/, "a decimal version");
const target = z.object({ type: z.enum(["post", "comment", "user"]), id });
const relation = z.enum(relationNames as [Relation, ...Relation[]]);
const count = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

/**
 * A user joining or leaving a target's members. Messages of relays from before
 * collects and follows carry no `kind` or `relation` (a like) and say `liked`
 * where newer ones say `member`.
 */
export const relationChangeMessage = z
  .object({
    eventId: z.string().min(1),
    kind: z.literal("relation").optional(),
    relation: relation.default("like"),
    target,
    userId: id,
    authorId: id.nullable(),
    member: z.boolean().optional(),
    liked: z.boolean().optional(),
    version,
    at: z.iso.datetime(),
  })
  .refine((m) => m.member !== undefined || m.liked !== undefined, { message: "member is missing", path: ["member"] })
  .refine((m) => (relations[m.relation].targets as readonly string[]).includes(m.target.type), {
    message: "the target's type has no members of this relation",
    path: ["target", "type"],
  });

/** Views of a post counted by one flush, with the epoch's running total after it. */
export const viewChangeMessage = z.object({
  eventId: z.string().min(1),
  kind: z.literal("views"),
  target: z.object({ type: z.literal("post"), id }),
  count,
  total: count,
  version,
  at: z.iso.datetime(),
});

export type ChangeMessage = z.input<typeof viewChangeMessage> | z.input<typeof relationChangeMessage>;

/**
 * What the relay publishes: the changes of one relay round bound for one persist
 * queue, in outbox order. One message per change cost the broker and the consumers
 * more than the change itself; a single change (the message above, which an older
 * relay publishes) is still read.
 */
export const changeBatchMessage = z.object({ changes: z.array(z.unknown()).min(1) });

export type ChangeBatchMessage = { readonly changes: ChangeMessage[] };

// Repairs published before collects and follows carry no relation: theirs is the like.
const relationTarget = { relation: relation.default("like"), target };
const derivedName = z.enum([...new Set(Object.values(derivedCounters).flat())] as [CounterName, ...CounterName[]]);
export const repairMessage = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("alignDatabase"), ...relationTarget, observedVersion: version, add: z.array(id), remove: z.array(id) }),
  z.object({ kind: z.literal("recountDatabase"), ...relationTarget }),
  z.object({ kind: z.literal("recountRedis"), ...relationTarget, observedVersion: version }),
  z.object({ kind: z.literal("recountDerived"), target, names: z.array(derivedName).min(1) }),
  z.object({ kind: z.literal("mirrorDerived"), target, names: z.array(derivedName).min(1) }),
  z.object({ kind: z.literal("alignViews"), target, observedVersion: version, views: z.number().int().min(0) }),
]);

export type RepairMessage = z.infer<typeof repairMessage>;

/** The id of an outbox entry's message, the same whoever publishes it: brokers and consumers may deduplicate on it. */
export const eventIdOf = (entry: OutboxEntry) => `${entry.partition}-${entry.entryId}`;

const targetOf = (t: { type: string; id: string }) => ({ type: t.type as TargetType, id: BigInt(t.id) });

export function toChangeMessage(entry: OutboxEntry): ChangeMessage {
  const { change } = entry;
  const common = { eventId: eventIdOf(entry), version: change.version.toString(), at: change.at.toISOString() };
  if (change.kind === "views") {
    return { ...common, kind: "views", target: { type: "post", id: change.target.id.toString() }, count: change.count, total: change.total };
  }
  return {
    ...common,
    kind: "relation",
    relation: change.relation,
    target: { type: change.target.type, id: change.target.id.toString() },
    userId: change.userId.toString(),
    authorId: change.authorId?.toString() ?? null,
    member: change.member,
  };
}

export function toChangeBatchMessage(entries: readonly OutboxEntry[]): ChangeBatchMessage {
  return { changes: entries.map(toChangeMessage) };
}

function fromViewChangeMessage(m: z.infer<typeof viewChangeMessage>): Change {
  return { kind: "views", target: targetOf(m.target), count: m.count, total: m.total, version: BigInt(m.version), at: new Date(m.at) };
}

function fromRelationChangeMessage(m: z.infer<typeof relationChangeMessage>): Change {
  return {
    kind: "relation",
    relation: m.relation,
    target: targetOf(m.target),
    userId: BigInt(m.userId),
    authorId: m.authorId === null ? null : BigInt(m.authorId),
    member: (m.member ?? m.liked) as boolean,
    version: BigInt(m.version),
    at: new Date(m.at),
  };
}

export function toRepairMessage(repair: Repair): RepairMessage {
  const target = { type: repair.target.type, id: repair.target.id.toString() };
  switch (repair.kind) {
    case "alignDatabase":
      return {
        kind: repair.kind,
        relation: repair.relation,
        target,
        observedVersion: repair.observedVersion.toString(),
        add: repair.add.map(String),
        remove: repair.remove.map(String),
      };
    case "recountDatabase":
      return { kind: repair.kind, relation: repair.relation, target };
    case "recountRedis":
      return { kind: repair.kind, relation: repair.relation, target, observedVersion: repair.observedVersion.toString() };
    case "recountDerived":
    case "mirrorDerived":
      return { kind: repair.kind, target, names: [...repair.names] };
    case "alignViews":
      return { kind: repair.kind, target, observedVersion: repair.observedVersion.toString(), views: repair.views };
  }
}

export function fromRepairMessage(m: RepairMessage): Repair {
  const target = targetOf(m.target);
  switch (m.kind) {
    case "alignDatabase":
      return { kind: m.kind, relation: m.relation, target, observedVersion: BigInt(m.observedVersion), add: m.add.map(BigInt), remove: m.remove.map(BigInt) };
    case "recountDatabase":
      return { kind: m.kind, relation: m.relation, target };
    case "recountRedis":
      return { kind: m.kind, relation: m.relation, target, observedVersion: BigInt(m.observedVersion) };
    case "recountDerived":
    case "mirrorDerived":
      return { kind: m.kind, target, names: m.names };
    case "alignViews":
      return { kind: m.kind, target, observedVersion: BigInt(m.observedVersion), views: m.views };
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

/** A change message of either kind, read by the schema its `kind` names (a message without one is a membership change). */
export function parseChange(body: unknown): Delivery<Change> {
  const read = jsonOf(body);
  if ("problem" in read) return { kind: "invalid", reason: read.problem };
  const kind = typeof read.json === "object" && read.json !== null ? (read.json as { kind?: unknown }).kind : undefined;
  return kind === "views"
    ? parseMessage(viewChangeMessage, fromViewChangeMessage, read.json)
    : parseMessage(relationChangeMessage, fromRelationChangeMessage, read.json);
}

/** One change of a message, read or refused, with its own part of the body (what goes to the dead-letter queue). */
export interface ChangeDelivery {
  readonly delivery: Delivery<Change>;
  readonly body: unknown;
}

/**
 * The changes a message carries, each read on its own so one bad change does not
 * hold back the rest: a batch's changes in order, or the single change of an
 * older relay's message. A body that is neither is one refused delivery.
 */
export function parseChanges(body: unknown): ChangeDelivery[] {
  const read = jsonOf(body);
  if ("problem" in read) return [{ delivery: { kind: "invalid", reason: read.problem }, body }];
  const batch = changeBatchMessage.safeParse(read.json);
  if (!batch.success) return [{ delivery: parseChange(read.json), body: read.json }];
  return batch.data.changes.map((change) => ({ delivery: parseChange(change), body: change }));
}
export const parseRepair = (body: unknown) => parseMessage(repairMessage, fromRepairMessage, body);
