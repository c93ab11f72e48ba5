// The status codes every script returns first in its reply (their Lua headers say
// which each can return), and the one place a status becomes an error. A code
// means the same in every script.
import { TargetFullError } from "../../errors.js";

export const ScriptStatus = {
  /** The script changed what it was asked to: added, removed, created, replayed, evicted, released. */
  Applied: 1,
  /** Nothing to do: already so, or no longer applies. */
  Unchanged: 0,
  /** The target's counter hash is not in Redis. */
  TargetAbsent: -1,
  /** Every membership generation of the target is full. */
  TargetFull: -2,
  /** The caller passed arguments the script refuses; nothing was written. */
  InvalidArguments: -3,
  /** The target has changes PostgreSQL has not applied yet. */
  NotPersisted: -4,
  /** The target changed since the caller looked at it. */
  ChangedSince: -5,
  /** The target has grown past the membership generations the caller passed keys for. */
  TooManyGenerations: -6,
  /** A late change arrived after the rebuild window closed: Redis can no longer tell what supersedes it. */
  TooLate: -7,
  /** A rate budget holds less than the cost asked for; nothing was charged. */
  OverBudget: -8,
  /** A write ran after its deadline (includes/deadline.lua); nothing was written. */
  DeadlinePassed: -9,
  /** The caller's lock expired or was taken over before the write; nothing was written. */
  LockLost: -10,
  /** Processes writing member indexes another way run, or the caller's fence generation is stale (index-fence.ts); nothing was completed. */
  Fenced: -11,
} as const;

export type ScriptStatus = (typeof ScriptStatus)[keyof typeof ScriptStatus];

/** A script's reply: its status, then what the script returns with it. */
export type ScriptReply<Data = never> = [status: ScriptStatus, data?: Data];

/** A reply the caller did not expect: always a fault of the caller or of the script, never of the user. */
export class ScriptReplyError extends Error {
  override readonly name = "ScriptReplyError";
  constructor(script: string, status: number, subject: string) {
    super(`Script ${script} answered status ${status} (${statusName(status)}) for ${subject}.`);
  }
}

function statusName(status: number): string {
  return Object.entries(ScriptStatus).find(([, code]) => code === status)?.[0] ?? "unknown";
}

/**
 * The error for a status its caller does not handle as a result. A full target
 * is the user's to hear about (FORBIDDEN, through the like use case); every other
 * status, invalid arguments above all, is a fault and raises.
 */
export function toError(script: string, status: number, target: { readonly type: string; readonly id: bigint }): Error {
  if (status === ScriptStatus.TargetFull) return new TargetFullError(target);
  return new ScriptReplyError(script, status, `${target.type} ${target.id}`);
}
