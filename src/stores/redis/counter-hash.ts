// A target's counter hash as Redis holds it: its counts, and the bookkeeping
// fields beside them that never leave the Redis stores.
import type { Counts } from "../../domain/model.js";
import { versionOf } from "../versions.js";
import { authorField, bookkeepingFields, epochField, generationField, versionField } from "./keys.js";

export interface CounterHash {
  readonly counts: Counts;
  /** Newest membership generation (0 for all but the biggest targets). */
  readonly generation: number;
  /** Author of a post or comment, so a like can be credited without a database read. */
  readonly authorId: bigint | null;
  /** Version of the target's latest like change in Redis (0 when none). */
  readonly version: bigint;
}

/** Reads HGETALL's object or a script's flat field/value array. */
export function parseCounterHash(raw: Readonly<Record<string, string>> | readonly string[]): CounterHash {
  const entries: [string, string][] = [];
  if (Array.isArray(raw)) {
    for (let i = 0; i + 1 < raw.length; i += 2) entries.push([raw[i] as string, raw[i + 1] as string]);
  } else {
    entries.push(...Object.entries(raw as Record<string, string>));
  }
  const counts: Record<string, number> = {};
  let generation = 0;
  let authorId: bigint | null = null;
  let epoch = 0n;
  let micros = 0n;
  for (const [field, value] of entries) {
    if (field === generationField) generation = Number(value);
    else if (field === authorField) authorId = BigInt(value);
    else if (field === epochField) epoch = BigInt(value);
    else if (field === versionField) micros = BigInt(value);
    else if (!bookkeepingFields.has(field)) counts[field] = Number(value);
  }
  return { counts, generation, authorId, version: versionOf(epoch, micros) };
}
