// An outbox entry's fields, as scripts/includes/append-event.lua writes them, read
// back as the change they carry (or what is wrong with them).
import {
  isDecimalId,
  relations,
  type MalformedOutboxEntry,
  type OutboxEntry,
  type Relation,
  type RelationChange,
  type TargetType,
} from "../../domain/model/index.js";
import { relationLayouts, relationOfTag } from "./relations.js";
import { versionOf } from "../versions.js";

/** An entry's fields as a change, or what is wrong with them. */
export function decodeOutboxEntry(partition: number, entryId: string, fields: readonly string[]): OutboxEntry | MalformedOutboxEntry {
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i] as string, fields[i + 1] as string);
  const type = f.get("t");
  // Entries appended before epochs existed carry no 'e' (epoch 0); before collects and follows, no 'r' (a like).
  const [id, micros, ts, epoch = "0", kind = "", tag = relationLayouts.like.tag] = ["i", "v", "ts", "e", "k", "r"].map((name) => f.get(name));
  const at = new Date(Number(ts));
  const common = [
    id && isDecimalId(id) ? null : "i is not an id",
    micros && /^[0-9]{1,16}$/.test(micros) ? null : "v is not a version",
    /^[0-9]{1,18}$/.test(epoch) ? null : "e is not an epoch",
    Number.isNaN(at.getTime()) ? "ts is not a time" : null,
  ];
  const malformed = (problems: readonly (string | null)[]): MalformedOutboxEntry | null => {
    const found = problems.filter((p): p is string => p !== null);
    return found.length === 0
      ? null
      : {
          partition,
          entryId,
          problem: `outbox entry ${entryId} of partition ${partition} is malformed (${found.join("; ")}): ${JSON.stringify(Object.fromEntries(f))}`,
        };
  };
  const version = () => versionOf(BigInt(epoch), BigInt(micros as string));
  if (kind === "v") {
    const [added, total] = ["n", "o"].map((name) => f.get(name));
    const problem = malformed([
      ...common,
      type === "post" ? null : "t is not post",
      added && /^[1-9][0-9]{0,14}$/.test(added) ? null : "n is not a count",
      total && /^[1-9][0-9]{0,14}$/.test(total) ? null : "o is not a count",
    ]);
    if (problem) return problem;
    return {
      partition,
      entryId,
      change: { kind: "views", target: { type: "post", id: BigInt(id as string) }, count: Number(added), total: Number(total), version: version(), at },
    };
  }
  const relation = relationOfTag(tag);
  const [user, author = "", state] = ["u", "a", "s"].map((name) => f.get(name));
  const problem = malformed([
    ...common,
    kind === "" ? null : "k is not a kind of change",
    relation ? null : "r is not a relation",
    relation && type && (relations[relation].targets as readonly string[]).includes(type) ? null : "t is not a target of the relation",
    user && isDecimalId(user) ? null : "u is not an id",
    author === "" || isDecimalId(author) ? null : "a is neither empty nor an id",
    state === "0" || state === "1" ? null : "s is not 0 or 1",
  ]);
  if (problem) return problem;
  const change: RelationChange = {
    kind: "relation",
    relation: relation as Relation,
    target: { type: type as TargetType, id: BigInt(id as string) },
    userId: BigInt(user as string),
    authorId: author === "" ? null : BigInt(author),
    member: state === "1",
    version: version(),
    at,
  };
  return { partition, entryId, change };
}
