// A target's counter hash as Redis holds it: its counts, and the bookkeeping
// fields beside them that never leave the Redis stores.
import type { CounterName, Counts, Relation } from "../../domain/model/index.js";
import { versionOf } from "../versions.js";
import { authorField, epochField, isBookkeepingField, seqFieldPrefix, versionField } from "./keys.js";
import { relationLayouts } from "./relations.js";

export interface CounterHash {
  readonly counts: Counts;
  /** Newest membership generation of each relation (0 for all but the biggest targets). */
  readonly generations: Readonly<Record<Relation, number>>;
  /** Author of a post or comment, so likes and collects can be credited without a database read. */
  readonly authorId: bigint | null;
  /** Version of the target's latest change in Redis (0 when none). */
  readonly version: bigint;
  /** Sequence numbers of the derived counters' values (scripts/mirror-counters.lua). */
  readonly seqs: Readonly<Partial<Record<CounterName, bigint>>>;
}

const relationOfGenerationField = new Map(Object.entries(relationLayouts).map(([relation, layout]) => [layout.generationField, relation as Relation]));

/** Reads HGETALL's object or a script's flat field/value array. */
export function parseCounterHash(raw: Readonly<Record<string, string>> | readonly string[]): CounterHash {
  const entries: [string, string][] = [];
  if (Array.isArray(raw)) {
    for (let i = 0; i + 1 < raw.length; i += 2) entries.push([raw[i] as string, raw[i + 1] as string]);
  } else {
    entries.push(...Object.entries(raw as Record<string, string>));
  }
  const counts: Record<string, number> = {};
  const seqs: Record<string, bigint> = {};
  const generations: Record<Relation, number> = { like: 0, collect: 0, follow: 0 };
  let authorId: bigint | null = null;
  let epoch = 0n;
  let micros = 0n;
  for (const [field, value] of entries) {
    const relation = relationOfGenerationField.get(field);
    if (relation) generations[relation] = Number(value);
    else if (field === authorField) authorId = BigInt(value);
    else if (field === epochField) epoch = BigInt(value);
    else if (field === versionField) micros = BigInt(value);
    else if (field.startsWith(seqFieldPrefix)) seqs[field.slice(seqFieldPrefix.length)] = BigInt(value);
    else if (!isBookkeepingField(field)) counts[field] = Number(value);
  }
  return { counts, generations, authorId, version: versionOf(epoch, micros), seqs };
}
