// How each relation lives in Redis: the prefix of its membership shards, the
// counter hash field holding its newest membership generation, and the tag its
// changes carry in the outbox. Likes keep the names they had before collects and
// follows joined, so a Redis written by an earlier version reads the same.
import type { Relation } from "../../domain/model/index.js";

export interface RelationLayout {
  readonly shardPrefix: string;
  readonly generationField: string;
  /** The outbox event's 'r' field (scripts/includes/append-event.lua); an event without one is a like. */
  readonly tag: string;
}

export const relationLayouts: Readonly<Record<Relation, RelationLayout>> = {
  like: { shardPrefix: "lk", generationField: "gen", tag: "l" },
  collect: { shardPrefix: "cl", generationField: "gen:c", tag: "c" },
  follow: { shardPrefix: "fw", generationField: "gen:f", tag: "f" },
};

const byTag = new Map(Object.entries(relationLayouts).map(([relation, layout]) => [layout.tag, relation as Relation]));

/** The relation an outbox event's tag names, or null for a tag no version wrote. */
export function relationOfTag(tag: string): Relation | null {
  return byTag.get(tag) ?? null;
}
