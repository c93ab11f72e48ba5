import calculateSlot from "cluster-key-slot";
import { Cluster } from "ioredis";
import { relationsOf, type Counts, type Relation, type Target, type TargetView } from "../../domain/model.js";
import type { CounterStore, ViewRequest } from "../../domain/ports.js";
import { batchRead, inTickPipeline, type RedisClient } from "./client.js";
import { parseCounterHash } from "./counter-hash.js";
import type { Fill, HotCounts, HotTarget } from "./hot-counts.js";
import { authorField, type RedisKeys } from "./keys.js";
import { relationLayouts } from "./relations.js";
import { ScriptStatus, toError } from "./statuses.js";

/**
 * One target as Redis answered: counters (null when the caller held them and
 * asked for memberships alone), the viewer's memberships, each relation's newest
 * generation (read with the counters), and the relations whose membership is
 * unknown because the target has grown past the shards asked.
 */
interface Read {
  readonly counts: Counts | null;
  readonly viewerIn: TargetView["viewerIn"];
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
  /** Counts kept in this process's memory, served within their bound; without them every view reads Redis. */
  readonly hotCounts?: HotCounts;
}

const nodeBySlotMap = (cluster: Cluster, key: string) => cluster.slots[calculateSlot(key)]?.[0] ?? "";

export function createCounterStore(redis: RedisClient, keys: RedisKeys, options: CounterStoreOptions = {}): CounterStore {
  const nodeOf = options.nodeOf ?? nodeBySlotMap;
  const { hotCounts } = options;
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

  /**
   * What one read asks of each target i: whether to read its counters (else the
   * caller holds them), and how many of the viewer's shards of relation j to pass
   * (generations 0..shards-1).
   */
  interface Asked {
    readonly counters: (i: number) => boolean;
    readonly shards: (i: number, j: number) => number;
  }

  /** Reads targets (their counter hash keys given) in one call per node. */
  function readOnce(targets: readonly Target[], counterKeys: readonly string[], request: ViewRequest, asked: Asked): Promise<(Read | null)[]> {
    if (redis instanceof Cluster) return readPerNode(redis, targets, counterKeys, request, asked);
    return readScript((args) => inTickPipeline(redis, (pipeline) => void pipeline.readTargets(...args)).then(([reply]) => reply), targets, counterKeys, request, asked);
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
    asked: Asked,
    firstKeyOnly = false,
  ): Promise<(Read | null)[]> {
    const viewer = request.viewerId;
    const relations = request.relations;
    // One list built in place: the command's arguments are much of a feed's client cost.
    const keyList: string[] = [...counterKeys];
    const flags: number[] = [];
    const shardCounts: number[] = [];
    const shardOf = viewer === null ? [] : relations.map((relation) => keys.memberShardsOf(relation, viewer));
    targets.forEach((target, i) => {
      flags.push(asked.counters(i) ? 1 : 0);
      relations.forEach((_, j) => {
        const shards = viewer === null ? 0 : asked.shards(i, j);
        shardCounts.push(shards);
        const shard = shardOf[j] as (target: Target, generation: number) => string;
        for (let g = 0; g < shards; g++) keyList.push(shard(target, g));
      });
    });
    const declared = firstKeyOnly ? keyList.splice(0, 1) : keyList.splice(0);
    const args: [number, ...(string | number)[]] = [
      declared.length, ...declared,
      targets.length, viewer?.toString() ?? "", request.names.length, ...request.names,
      relations.length, ...relations.map((r) => relationLayouts[r].generationField), ...flags, ...shardCounts,
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
  async function readPerNode(cluster: Cluster, targets: readonly Target[], counterKeys: readonly string[], request: ViewRequest, asked: Asked): Promise<(Read | null)[]> {
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
        const groupAsked: Asked = { counters: (k) => asked.counters(group[k] as number), shards: (k, j) => asked.shards(group[k] as number, j) };
        const found = await readScript((args) => cluster.readTargets(...args), pick(targets), pick(counterKeys), request, groupAsked, true).catch((error: unknown) => {
          if (!slotsMoved(error)) throw error;
          return readWithPipelines(cluster, pick(targets), request, groupAsked);
        });
        found.forEach((read, k) => (reads[group[k] as number] = read));
      }),
    );
    return reads;
  }

  /** The same reads as commands, each routed by its own key (ioredis's auto-pipelining groups them per node). */
  async function readWithPipelines(cluster: Cluster, targets: readonly Target[], request: ViewRequest, asked: Asked): Promise<(Read | null)[]> {
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
            Promise.all(Array.from({ length: shards }, (_, g) => cluster.sismember(keys.memberShard(relation, target, viewer as bigint, g), (viewer as bigint).toString()))),
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

  /** A read's counters and generations (of every relation of the type) as an entry of the hot counts. */
  const hotTarget = (read: Read, relations: readonly Relation[]): HotTarget => ({
    counts: read.counts ?? {},
    generations: Object.fromEntries(relations.map((relation, j) => [relation, read.generations[j] ?? 0])),
  });

  /**
   * A view as the reads make it: every relation of the targets' type has its
   * generation read (an entry of the hot counts must serve any later request),
   * but only the relations asked look the viewer up.
   */
  interface Plan {
    readonly request: ViewRequest;
    readonly asks: readonly boolean[];
  }

  const planOf = (targets: readonly Target[], request: ViewRequest): Plan => {
    const all = relationsOf((targets[0] as Target).type);
    return {
      request: { ...request, relations: all },
      asks: all.map((relation) => request.viewerId !== null && request.relations.includes(relation)),
    };
  };

  /** Whether a read leaves a relation asked unanswered: the target grew past the shards passed. */
  const unsure = (read: Read, plan: Plan) => read.unsure.some((u, j) => u && plan.asks[j]);

  /** The shards to pass of relation j first: one past the newest generation this process saw. */
  const guessShards = (plan: Plan, counterKey: string, j: number) =>
    plan.asks[j] ? (grown.get(grownKey(counterKey, plan.request.relations[j] as Relation)) ?? 0) + 1 : 0;

  /** Notes what a read of a target's counters told (its generations), and keeps it in the hot counts. */
  const learn = (plan: Plan, counterKey: string, read: Read, fill: Fill | undefined) => {
    plan.request.relations.forEach((relation, j) => remember(grownKey(counterKey, relation), read.generations[j] ?? 0));
    fill?.keep(counterKey, hotTarget(read, plan.request.relations));
  };

  /**
   * Reads, from Redis and exactly, the targets at `indexes`: counters and the
   * viewer's memberships; a target grown past the shards passed is read again
   * with the generations the read found.
   */
  async function readExactly(targets: readonly Target[], counterKeys: readonly string[], plan: Plan, indexes: readonly number[], answers: (Read | null)[]): Promise<void> {
    if (indexes.length === 0) return;
    const fill = hotCounts?.fill(indexes.map((i) => counterKeys[i] as string));
    try {
      let pending = indexes.map((i) => ({ i, shards: (j: number) => guessShards(plan, counterKeys[i] as string, j) }));
      for (let round = 0; pending.length > 0 && round < 3; round++) {
        const batch = pending;
        const reads = await readOnce(
          batch.map(({ i }) => targets[i] as Target),
          batch.map(({ i }) => counterKeys[i] as string),
          plan.request,
          { counters: () => true, shards: (k, j) => (batch[k] as (typeof batch)[number]).shards(j) },
        );
        pending = [];
        reads.forEach((read, k) => {
          const { i } = batch[k] as (typeof batch)[number];
          answers[i] = read;
          if (!read) return;
          learn(plan, counterKeys[i] as string, read, fill);
          if (unsure(read, plan)) pending.push({ i, shards: (j) => (plan.asks[j] ? (read.generations[j] ?? 0) + 1 : 0) });
        });
      }
    } finally {
      fill?.end();
    }
  }

  /**
   * Targets whose counters the hot counts hold, with the viewer's memberships:
   * one read per node asks the held targets for memberships alone, in the
   * generations held, and the others for everything; a barrier sent beside it
   * tells whether a write to a held target (a generation grown) was missed, and
   * such a target is read again. What is answered is then as of the read.
   */
  async function readBesideHeld(
    targets: readonly Target[],
    counterKeys: readonly string[],
    plan: Plan,
    hot: HotCounts,
    held: readonly (HotTarget | undefined)[],
    answers: (Read | null)[],
  ): Promise<void> {
    const { relations } = plan.request;
    const unheld = targets.flatMap((_, i) => (held[i] ? [] : [i]));
    const fill = hotCounts?.fill(unheld.map((i) => counterKeys[i] as string));
    let confirmed = true;
    const again: number[] = [];
    try {
      const [reads] = await Promise.all([
        readOnce(targets, counterKeys, plan.request, {
          counters: (i) => !held[i],
          shards: (i, j) => {
            const entry = held[i];
            if (!entry) return guessShards(plan, counterKeys[i] as string, j);
            return plan.asks[j] ? (entry.generations[relations[j] as Relation] ?? 0) + 1 : 0;
          },
        }),
        hot.barrier().catch(() => {
          confirmed = false;
        }),
      ]);
      reads.forEach((read, i) => {
        const entry = held[i];
        if (entry) {
          // Still the entry held once the barrier came back: no write to the target was missed.
          if (confirmed && read && hot.peek(counterKeys[i] as string) === entry) answers[i] = { ...read, counts: entry.counts };
          else again.push(i);
          return;
        }
        answers[i] = read;
        if (!read) return;
        learn(plan, counterKeys[i] as string, read, fill);
        if (unsure(read, plan)) again.push(i);
      });
    } finally {
      fill?.end();
    }
    await readExactly(targets, counterKeys, plan, again, answers);
  }

  return {
    async read(targets) {
      const hashes = await batchRead(redis, "hgetall", targets.map((t) => [keys.counters(t)] as const));
      return hashes.map((hash): Counts | null => (Object.keys(hash).length === 0 ? null : parseCounterHash(hash).counts));
    },
    async view(targets, request) {
      if (targets.length === 0) return [];
      const plan = planOf(targets, request);
      const counterKeys = targets.map((t) => keys.counters(t));
      const answers: (Read | null)[] = new Array<Read | null>(targets.length).fill(null);
      const hot = hotCounts && !request.exact && hotCounts.servable() ? hotCounts : null;
      if (!hot) {
        hotCounts?.missed(targets.length);
        await readExactly(targets, counterKeys, plan, targets.map((_, i) => i), answers);
      } else {
        const held = counterKeys.map((key) => hot.get(key));
        if (plan.asks.some(Boolean) && held.some(Boolean)) {
          await readBesideHeld(targets, counterKeys, plan, hot, held, answers);
        } else {
          held.forEach((entry, i) => {
            if (entry) answers[i] = { counts: entry.counts, viewerIn: {}, generations: [], unsure: [] };
          });
          await readExactly(targets, counterKeys, plan, targets.flatMap((_, i) => (held[i] ? [] : [i])), answers);
        }
      }
      return answers.map((read) => {
        if (!read) return null;
        const viewerIn: Partial<Record<Relation, boolean>> = {};
        plan.request.relations.forEach((relation, j) => {
          if (plan.asks[j]) viewerIn[relation] = read.viewerIn[relation] ?? false;
        });
        return { counts: read.counts ?? {}, viewerIn };
      });
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
