// A like change on its way from the outbox to PostgreSQL, and the rules for
// folding many of them into what a batch must apply.
import { z } from "zod";
import type { Target } from "./targets.js";

export interface LikeChange {
  readonly target: Target;
  readonly userId: bigint;
  /** Author of the target, credited with likesReceived; null when unknown. */
  readonly authorId: bigint | null;
  /** The state after the change. */
  readonly liked: boolean;
  /** Grows with every change of the target (scripts/includes/append-event.lua). */
  readonly version: bigint;
  readonly at: Date;
}

const decimal = z.string().regex(/^[1-9][0-9]{0,18}$/, "a positive decimal id");

/** The wire form of a like change: JSON, ids as strings. */
export const likeChangeMessage = z.object({
  eventId: z.string().min(1),
  target: z.object({ type: z.enum(["post", "comment"]), id: decimal }),
  userId: decimal,
  authorId: decimal.nullable(),
  liked: z.boolean(),
  version: decimal,
  at: z.iso.datetime(),
});

export type LikeChangeMessage = z.infer<typeof likeChangeMessage>;

export function toMessage(eventId: string, change: LikeChange): LikeChangeMessage {
  return {
    eventId,
    target: { type: change.target.type as "post" | "comment", id: change.target.id.toString() },
    userId: change.userId.toString(),
    authorId: change.authorId?.toString() ?? null,
    liked: change.liked,
    version: change.version.toString(),
    at: change.at.toISOString(),
  };
}

/** A message body as a change, or the reason it can never be applied. */
export function parseLikeChange(body: unknown): { change: LikeChange } | { invalid: string } {
  let value = body;
  if (typeof body === "string" || Buffer.isBuffer(body)) {
    try {
      value = JSON.parse(body.toString());
    } catch {
      return { invalid: "body is not JSON" };
    }
  }
  const parsed = likeChangeMessage.safeParse(value);
  if (!parsed.success) {
    return { invalid: parsed.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; ") };
  }
  const m = parsed.data;
  return {
    change: {
      target: { type: m.target.type, id: BigInt(m.target.id) },
      userId: BigInt(m.userId),
      authorId: m.authorId === null ? null : BigInt(m.authorId),
      liked: m.liked,
      version: BigInt(m.version),
      at: new Date(m.at),
    },
  };
}

/**
 * The newest change per (target, user): what a batch must apply. Older changes
 * of the same pair are superseded whatever order they arrived in.
 */
export function coalesce(changes: readonly LikeChange[]): LikeChange[] {
  const newest = new Map<string, LikeChange>();
  for (const change of changes) {
    const key = `${change.target.type}:${change.target.id}:${change.userId}`;
    const kept = newest.get(key);
    if (!kept || change.version > kept.version) newest.set(key, change);
  }
  return [...newest.values()];
}
