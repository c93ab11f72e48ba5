// Reads what feeds show of many targets with scripts/read-targets.lua: one call
// per Redis node, its one-string reply decoded here. The counter store decides
// what to ask (counters, or the viewer's memberships alone for counts it holds).
import { Cluster } from "ioredis";
import type { Counts, Relation, Target, TargetType, TargetReadout } from "../../domain/model/index.js";
import type { ReadoutRequest } from "../../domain/ports/index.js";
import { inTickPipeline, type RedisClient } from "./client.js";
import { nodeBySlotMap, slotsMoved } from "./per-node.js";
import type { RedisKeys } from "./keys.js";
import type { MemberIndexes } from "./member-index-store.js";
import { relationLayouts } from "./relations.js";
import { ScriptStatus, toError } from "./statuses.js";

/**
 * One target as Redis answered: counters (null when the caller held them and
 * asked for memberships alone), the viewer's memberships, each relation's newest
 * generation (read with the counters), and the relations whose membership is
 * unknown because the target has grown past the shards asked.
 */
export interface Read {
  readonly counts: Counts | null;
  readonly viewerIn: TargetReadout["viewerIn"];
  readonly generations: readonly number[];
  readonly unsure: readonly boolean[];
}

const semicolon = 59;
const comma = 44;
const minus = 45;
const digit0 = 48;
const digit9 = 57;
const one = 49;
const question = 63;
const equals = 61;

/**
 * scripts/read-targets.lua's text: a line per target, '' where Redis does not
 * hold it, '=' and a membership mark per relation where the counters were not
 * asked for, else the counters and each relation's newest generation, each
 * followed by a comma, then a membership mark per relation.
 * Read by character codes rather than split(): no array or string per value, in
 * the hottest loop of a feed (measured about 8 µs against 55 µs for 100 targets).
 */
export function decodeTargetLines(text: string, targets: number, names: readonly string[], relations: readonly Relation[] = []): (Read | null)[] {
  const reads: (Read | null)[] = [];
  const end = text.length;
  let pos = 0;
  const malformed = (line: number) => new Error(`read-targets answered a malformed line for target ${line + 1}: ${JSON.stringify(text.slice(0, 200))}`);
  for (let t = 0; t < targets; t++) {
    if (t > 0) {
      if (pos >= end) throw new Error(`read-targets answered ${t} lines for ${targets} targets.`);
      if (text.charCodeAt(pos) !== semicolon) throw malformed(t - 1);
      pos++;
    }
    if (pos === end || text.charCodeAt(pos) === semicolon) {
      reads.push(null);
      continue;
    }
    let counts: Record<string, number> | null = null;
    const generations: number[] = [];
    if (text.charCodeAt(pos) === equals) {
      pos++;
    } else {
      counts = {};
      for (let field = 0; field < names.length + relations.length; field++) {
        const negative = text.charCodeAt(pos) === minus;
        if (negative) pos++;
        let value = 0;
        let digits = 0;
        for (let c = text.charCodeAt(pos); c >= digit0 && c <= digit9; c = text.charCodeAt(++pos)) {
          value = value * 10 + (c - digit0);
          digits++;
        }
        if (field < names.length) {
          if (digits > 0) counts[names[field] as string] = negative ? -value : value;
        } else generations.push(value);
        if (text.charCodeAt(pos) !== comma) throw malformed(t);
        pos++;
      }
    }
    const viewerIn: Partial<Record<Relation, boolean>> = {};
    const unsure: boolean[] = [];
    for (const relation of relations) {
      const mark = text.charCodeAt(pos);
      if (mark === one || mark === digit0 || (mark === question && counts !== null)) {
        pos++;
        viewerIn[relation] = mark === one;
        unsure.push(mark === question);
      } else {
        viewerIn[relation] = false;
        unsure.push(false);
      }
    }
    reads.push({ counts, viewerIn, generations, unsure });
  }
  if (pos < end) {
    if (targets === 0 || text.charCodeAt(pos) !== semicolon) throw malformed(Math.max(0, targets - 1));
    throw new Error(`read-targets answered ${targets + text.slice(pos).split(";").length - 1} lines for ${targets} targets.`);
  }
  return reads;
}

/**
 * What one read asks of each target i: whether to read its counters (else the
 * caller holds them), and how many of the viewer's shards of relation j to pass
 * (generations 0..shards-1).
 */
export interface Asked {
  readonly counters: (i: number) => boolean;
  readonly shards: (i: number, j: number) => number;
}

/** Reads targets (their counter hash keys given) in one call per node. */
export type TargetReader = (targets: readonly Target[], counterKeys: readonly string[], request: ReadoutRequest, asked: Asked) => Promise<(Read | null)[]>;

/** On a cluster, the node serving a key as the client believes. */
export type NodeOf = (cluster: Cluster, key: string) => string;

export interface TargetReaderOptions {
  /** On a cluster, the node serving a key as the client believes: by default ioredis's slot map. */
  readonly nodeOf?: NodeOf;
  /** Where this Redis keeps member indexes (null on a cluster), and whom to tell of a viewer's missing one. */
  readonly memberIndexes?: { readonly indexes: MemberIndexes; missing(relation: Relation, targetType: TargetType, userId: bigint): void } | undefined;
}

/** read-targets' letter for a member index it found neither complete nor overflowed. */
const indexMissing = "m";

/** What every read takes: the client, its keys and the reader's options. */
interface ReaderContext {
  readonly redis: RedisClient;
  readonly keys: RedisKeys;
  readonly nodeOf: NodeOf;
  readonly memberIndexes: TargetReaderOptions["memberIndexes"];
}

function readOnce(
  reader: ReaderContext,
  targets: readonly Target[],
  counterKeys: readonly string[],
  request: ReadoutRequest,
  asked: Asked,
): Promise<(Read | null)[]> {
  const { redis } = reader;
  if (redis instanceof Cluster) return readPerNode(reader, redis, targets, counterKeys, request, asked);
  return readScript(
    reader,
    (args) => inTickPipeline(redis, (pipeline) => void pipeline.readTargets(...args)).then(([reply]) => reply),
    targets,
    counterKeys,
    request,
    asked,
  );
}

/**
 * read-targets over `targets`, its arguments handed to `send`: every key declared, or
 * on a cluster (`firstKeyOnly`) the first, the others named after the arguments.
 */
async function readScript(
  { keys, memberIndexes }: ReaderContext,
  send: (args: [number, ...(string | number)[]]) => Promise<unknown>,
  targets: readonly Target[],
  counterKeys: readonly string[],
  request: ReadoutRequest,
  asked: Asked,
  firstKeyOnly = false,
): Promise<(Read | null)[]> {
  const viewer = request.viewerId;
  const relations = request.relations;
  // One list built in place: the command's arguments are much of a feed's client cost.
  // Counter hashes only of the targets whose counters are asked for: a feed whose counts
  // this process holds sends none, a third of the bytes Redis parsed per feed.
  const keyList: string[] = counterKeys.filter((_, i) => asked.counters(i));
  const flags: number[] = [];
  const shardCounts: number[] = [];
  const shardOf = viewer === null ? [] : relations.map((relation) => keys.memberShardsOf(relation, viewer));
  targets.forEach((target, i) => {
    flags.push(asked.counters(i) ? 1 : 0);
    relations.forEach((_, j) => {
      const shards = viewer === null ? 0 : asked.shards(i, j);
      // One digit each in the call: a target has at most membershipGenerations (keys.ts).
      shardCounts.push(shards);
      const shard = shardOf[j] as (target: Target, generation: number) => string;
      for (let g = 0; g < shards; g++) keyList.push(shard(target, g));
    });
  });
  // The viewer's member index of each relation looked up, where this Redis keeps them:
  // one command then rules out every target the viewer did not join.
  const targetType = targets[0]?.type;
  const indexed = relations.map(
    (_, j) =>
      memberIndexes !== undefined &&
      viewer !== null &&
      !firstKeyOnly &&
      memberIndexes.indexes.open() &&
      shardCounts.some((p, k) => k % relations.length === j && p > 0),
  );
  if (indexed.some(Boolean)) {
    relations.forEach((relation, j) => {
      if (indexed[j]) keyList.push(memberIndexes?.indexes.key(relation, targetType as TargetType, viewer as bigint) as string);
    });
  }
  // Nothing to read (held counts, nobody asked about): on a cluster no key would route the call.
  if (keyList.length === 0) return decodeTargetLines(targets.map(() => "=").join(";"), targets.length, request.names, relations);
  const declared = firstKeyOnly ? keyList.splice(0, 1) : keyList.splice(0);
  const args: [number, ...(string | number)[]] = [
    declared.length,
    ...declared,
    targets.length,
    viewer?.toString() ?? "",
    request.names.length,
    ...request.names,
    relations.length,
    ...relations.map((r) => relationLayouts[r].generationField),
    flags.join(""),
    shardCounts.join(""),
    indexed.map((x) => (x ? 1 : 0)).join(""),
    memberIndexes?.indexes.generation() ?? 0,
    ...(indexed.some(Boolean) ? targets.map((t) => t.id.toString()) : []),
    ...keyList,
  ];
  const [status, text, indexStates] = (await send(args)) as [number, string?, string?];
  if (status !== ScriptStatus.Unchanged) throw toError("read-targets", status, targets[0] as Target);
  relations.forEach((relation, j) => {
    if (!indexed[j] || !memberIndexes) return;
    const missing = indexStates?.[j] === indexMissing;
    if (missing) memberIndexes.missing(relation, targetType as TargetType, viewer as bigint);
    memberIndexes.indexes.used(memberIndexes.indexes.key(relation, targetType as TargetType, viewer as bigint), missing);
  });
  return decodeTargetLines(text ?? "", targets.length, request.names, relations);
}

/**
 * On a cluster, one read-targets per master, over the targets whose slots it serves
 * (a target's keys share its slot; the script may read many slots of its own node).
 * A feed of 100 posts then costs three calls, not 300 commands: about a fifth of the
 * API's CPU per feed (npm run bench -- scale). When the slot map ioredis holds is
 * out of date (slots moving), the node refuses keys it no longer serves, and that
 * node's targets are read one by one, each routed on its own.
 */
async function readPerNode(
  reader: ReaderContext,
  cluster: Cluster,
  targets: readonly Target[],
  counterKeys: readonly string[],
  request: ReadoutRequest,
  asked: Asked,
): Promise<(Read | null)[]> {
  const byNode = new Map<string, number[]>();
  counterKeys.forEach((key, i) => {
    const node = reader.nodeOf(cluster, key);
    const group = byNode.get(node);
    if (group) group.push(i);
    else byNode.set(node, [i]);
  });
  const reads: (Read | null)[] = new Array<Read | null>(targets.length).fill(null);
  await Promise.all(
    [...byNode.values()].map(async (group) => {
      const pick = <T>(items: readonly T[]) => group.map((i) => items[i] as T);
      const groupAsked: Asked = { counters: (k) => asked.counters(group[k] as number), shards: (k, j) => asked.shards(group[k] as number, j) };
      const found = await readScript(reader, (args) => cluster.readTargets(...args), pick(targets), pick(counterKeys), request, groupAsked, true).catch(
        (error: unknown) => {
          if (!slotsMoved(error)) throw error;
          return readWithPipelines(reader.keys, cluster, pick(targets), request, groupAsked);
        },
      );
      found.forEach((read, k) => (reads[group[k] as number] = read));
    }),
  );
  return reads;
}

/** The same reads as commands, each routed by its own key (ioredis's auto-pipelining groups them per node). */
async function readWithPipelines(
  keys: RedisKeys,
  cluster: Cluster,
  targets: readonly Target[],
  request: ReadoutRequest,
  asked: Asked,
): Promise<(Read | null)[]> {
  const { relations } = request;
  const fields = [...request.names, ...relations.map((r) => relationLayouts[r].generationField)];
  const viewer = request.viewerId;
  return Promise.all(
    targets.map(async (target, i): Promise<Read | null> => {
      const memberships = relations.map((relation, j) => ({ relation, shards: viewer === null ? 0 : asked.shards(i, j) }));
      const readsCounters = asked.counters(i);
      const [values, exists, ...members] = await Promise.all([
        readsCounters ? cluster.hmget(keys.counters(target), ...fields) : [],
        readsCounters ? cluster.exists(keys.counters(target)) : 1,
        ...memberships.map(({ relation, shards }) =>
          Promise.all(
            Array.from({ length: shards }, (_, g) => cluster.sismember(keys.memberShard(relation, target, viewer as bigint, g), (viewer as bigint).toString())),
          ),
        ),
      ]);
      if (exists === 0) return null;
      const counts: Record<string, number> | null = readsCounters ? {} : null;
      request.names.forEach((name, j) => {
        const value = values[j];
        if (counts && value) counts[name] = Number(value);
      });
      const generations = readsCounters ? relations.map((_, j) => Number(values[request.names.length + j] ?? 0)) : [];
      const viewerIn: Partial<Record<Relation, boolean>> = {};
      const unsure: boolean[] = [];
      memberships.forEach(({ relation, shards }, j) => {
        const member = (members[j] as number[]).some((m) => m === 1);
        viewerIn[relation] = member;
        unsure.push(readsCounters && !member && viewer !== null && (generations[j] ?? 0) >= shards);
      });
      return { counts, viewerIn, generations, unsure };
    }),
  );
}

export function createTargetReader(redis: RedisClient, keys: RedisKeys, options: TargetReaderOptions = {}): TargetReader {
  const reader: ReaderContext = { redis, keys, nodeOf: options.nodeOf ?? nodeBySlotMap, memberIndexes: options.memberIndexes };
  return (targets, counterKeys, request, asked) => readOnce(reader, targets, counterKeys, request, asked);
}
