import calculateSlot from "cluster-key-slot";
import { Cluster } from "ioredis";
import type { Counts, Relation, Target, TargetView } from "../../domain/model.js";
import type { CounterStore, ViewRequest } from "../../domain/ports.js";
import { batchRead, inTickPipeline, type RedisClient } from "./client.js";
import { parseCounterHash } from "./counter-hash.js";
import { authorField, type RedisKeys } from "./keys.js";
import { relationLayouts } from "./relations.js";
import { ScriptStatus, toError } from "./statuses.js";

/**
 * One target as Redis answered: counters, the viewer's memberships, each
 * relation's newest generation, and the relations whose membership is unknown
 * because the target has grown past the shards asked.
 */
interface Read extends TargetView {
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

/**
 * scripts/read-targets.lua's text: a line per target, '' where Redis does not
 * hold it, else the counters and each relation's newest generation, each
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
    const counts: Record<string, number> = {};
    const generations: number[] = [];
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
    const viewerIn: Partial<Record<Relation, boolean>> = {};
    const unsure: boolean[] = [];
    for (const relation of relations) {
      const mark = text.charCodeAt(pos);
      if (mark === one || mark === digit0 || mark === question) {
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
 * Whether a cluster node refused a script for keys of slots it does not serve (any more, or
 * not yet). ioredis follows MOVED and ASK for the first key itself; the others only the node sees.
 */
const slotsMoved = (error: unknown) => error instanceof Error && /Script attempted to access (a non local key|a slot not served)/.test(error.message);

export interface CounterStoreOptions {
  /**
   * On a cluster, the node serving a key as the client believes: by default ioredis's
   * slot map. Tests pass a wrong one to see refused keys read one by one.
   */
  readonly nodeOf?: (cluster: Cluster, key: string) => string;
}

const nodeBySlotMap = (cluster: Cluster, key: string) => cluster.slots[calculateSlot(key)]?.[0] ?? "";

export function createCounterStore(redis: RedisClient, keys: RedisKeys, options: CounterStoreOptions = {}): CounterStore {
  const nodeOf = options.nodeOf ?? nodeBySlotMap;
  // Targets this process has seen grown past their first membership generation, per
  // relation, with the newest generation seen, so a viewer's membership is looked up in
  // one round trip; a target that grew since costs a second one. Few targets ever grow
  // (those with hundreds of members); the bound only guards against a pathological spread.
  const grown = new Map<string, number>();
  const grownKey = (counterKey: string, relation: Relation) => (relation === "like" ? counterKey : `${counterKey}|${relation}`);
  const remember = (key: string, generation: number) => {
    if (generation === (grown.get(key) ?? 0)) return;
    if (grown.size >= 100_000) grown.clear();
    if (generation === 0) grown.delete(key);
    else grown.set(key, generation);
  };

  /** Reads targets (their counter hash keys given), passing the viewer's shards of generations 0..shardsOf(i, j)-1 of relation j. */
  function readOnce(
    targets: readonly Target[],
    counterKeys: readonly string[],
    request: ViewRequest,
    shardsOf: (i: number, j: number) => number,
  ): Promise<(Read | null)[]> {
    if (redis instanceof Cluster) return readPerNode(redis, targets, counterKeys, request, shardsOf);
    return readScript((args) => inTickPipeline(redis, (pipeline) => void pipeline.readTargets(...args)).then(([reply]) => reply), targets, counterKeys, request, shardsOf);
  }

  /**
   * read-targets over `targets`, its arguments handed to `send`: every key declared, or
   * on a cluster (`firstKeyOnly`) the first, the others named after the arguments.
   */
  async function readScript(
    send: (args: [number, ...(string | number)[]]) => Promise<unknown>,
    targets: readonly Target[],
    counterKeys: readonly string[],
    request: ViewRequest,
    shardsOf: (i: number, j: number) => number,
    firstKeyOnly = false,
  ): Promise<(Read | null)[]> {
    const viewer = request.viewerId;
    const relations = request.relations;
    // One list built in place: the command's arguments are much of a feed's client cost.
    const keyList: string[] = [...counterKeys];
    const shardCounts: number[] = [];
    const shardOf = viewer === null ? [] : relations.map((relation) => keys.memberShardsOf(relation, viewer));
    targets.forEach((target, i) => {
      relations.forEach((_, j) => {
        const shards = viewer === null ? 0 : shardsOf(i, j);
        shardCounts.push(shards);
        const shard = shardOf[j] as (target: Target, generation: number) => string;
        for (let g = 0; g < shards; g++) keyList.push(shard(target, g));
      });
    });
    const declared = firstKeyOnly ? keyList.splice(0, 1) : keyList.splice(0);
    const args: [number, ...(string | number)[]] = [
      declared.length, ...declared,
      targets.length, viewer?.toString() ?? "", request.names.length, ...request.names,
      relations.length, ...relations.map((r) => relationLayouts[r].generationField), ...shardCounts,
      ...keyList,
    ];
    const [status, text] = (await send(args)) as [number, string?];
    if (status !== ScriptStatus.Unchanged) throw toError("read-targets", status, targets[0] as Target);
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
    cluster: Cluster,
    targets: readonly Target[],
    counterKeys: readonly string[],
    request: ViewRequest,
    shardsOf: (i: number, j: number) => number,
  ): Promise<(Read | null)[]> {
    const byNode = new Map<string, number[]>();
    counterKeys.forEach((key, i) => {
      const node = nodeOf(cluster, key);
      const group = byNode.get(node);
      if (group) group.push(i);
      else byNode.set(node, [i]);
    });
    const reads: (Read | null)[] = new Array<Read | null>(targets.length).fill(null);
    await Promise.all(
      [...byNode.values()].map(async (group) => {
        const pick = <T>(items: readonly T[]) => group.map((i) => items[i] as T);
        const groupShards = (k: number, j: number) => shardsOf(group[k] as number, j);
        const found = await readScript((args) => cluster.readTargets(...args), pick(targets), pick(counterKeys), request, groupShards, true).catch((error: unknown) => {
          if (!slotsMoved(error)) throw error;
          return readWithPipelines(cluster, pick(targets), request, groupShards);
        });
        found.forEach((read, k) => (reads[group[k] as number] = read));
      }),
    );
    return reads;
  }

  /** The same reads as commands, each routed by its own key (ioredis's auto-pipelining groups them per node). */
  async function readWithPipelines(cluster: Cluster, targets: readonly Target[], request: ViewRequest, shardsOf: (i: number, j: number) => number): Promise<(Read | null)[]> {
    const { relations } = request;
    const fields = [...request.names, ...relations.map((r) => relationLayouts[r].generationField)];
    const viewer = request.viewerId;
    return Promise.all(
      targets.map(async (target, i): Promise<Read | null> => {
        const asked = relations.map((relation, j) => ({ relation, shards: viewer === null ? 0 : shardsOf(i, j) }));
        const [values, exists, ...members] = await Promise.all([
          cluster.hmget(keys.counters(target), ...fields),
          cluster.exists(keys.counters(target)),
          ...asked.map(({ relation, shards }) =>
            Promise.all(Array.from({ length: shards }, (_, g) => cluster.sismember(keys.memberShard(relation, target, viewer as bigint, g), (viewer as bigint).toString()))),
          ),
        ]);
        if (exists === 0) return null;
        const counts: Record<string, number> = {};
        request.names.forEach((name, j) => {
          const value = values[j];
          if (value) counts[name] = Number(value);
        });
        const generations = relations.map((_, j) => Number(values[request.names.length + j] ?? 0));
        const viewerIn: Partial<Record<Relation, boolean>> = {};
        const unsure: boolean[] = [];
        asked.forEach(({ relation, shards }, j) => {
          const member = (members[j] as number[]).some((m) => m === 1);
          viewerIn[relation] = member;
          unsure.push(!member && viewer !== null && (generations[j] ?? 0) >= shards);
        });
        return { counts, viewerIn, generations, unsure };
      }),
    );
  }

  return {
    async read(targets) {
      const hashes = await batchRead(redis, "hgetall", targets.map((t) => [keys.counters(t)] as const));
      return hashes.map((hash): Counts | null => (Object.keys(hash).length === 0 ? null : parseCounterHash(hash).counts));
    },
    async view(targets, request) {
      if (targets.length === 0) return [];
      const { relations } = request;
      const counterKeys = targets.map((t) => keys.counters(t));
      const first = await readOnce(targets, counterKeys, request, (i, j) => (grown.get(grownKey(counterKeys[i] as string, relations[j] as Relation)) ?? 0) + 1);
      const unsure: number[] = [];
      first.forEach((read, i) => {
        if (!read) return;
        relations.forEach((relation, j) => remember(grownKey(counterKeys[i] as string, relation), read.generations[j] ?? 0));
        if (read.unsure.some(Boolean)) unsure.push(i);
      });
      if (unsure.length > 0) {
        const again = await readOnce(
          unsure.map((i) => targets[i] as Target),
          unsure.map((i) => counterKeys[i] as string),
          request,
          (k, j) => ((first[unsure[k] as number] as Read).generations[j] ?? 0) + 1,
        );
        unsure.forEach((i, k) => (first[i] = again[k] ?? null));
      }
      return first.map((read) => (read ? { counts: read.counts, viewerIn: read.viewerIn } : null));
    },
    async init(target, counts, authorId) {
      const fields: (string | number)[] = Object.entries(counts).flat();
      if (authorId !== undefined) fields.push(authorField, authorId.toString());
      const [status] = await redis.initCounters(keys.counters(target), ...fields);
      if (status === ScriptStatus.Applied || status === ScriptStatus.Unchanged) return status === ScriptStatus.Applied;
      throw toError("init-counters", status, target);
    },
    async mirror(values) {
      const byTarget = new Map<string, { target: Target; triples: (string | number)[] }>();
      for (const v of values) {
        const key = keys.counters(v.target);
        let entry = byTarget.get(key);
        if (!entry) byTarget.set(key, (entry = { target: v.target, triples: [] }));
        entry.triples.push(v.name, v.value, v.seq.toString());
      }
      await Promise.all(
        [...byTarget].map(async ([key, { target, triples }]) => {
          const [status] = await redis.mirrorCounters(key, ...triples);
          if (status !== ScriptStatus.Applied && status !== ScriptStatus.TargetAbsent) throw toError("mirror-counters", status, target);
        }),
      );
    },
  };
}
