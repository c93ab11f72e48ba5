// Targets' counts and the viewer's memberships in Redis, as feeds show them: read
// through the hot counts when this process holds them (hot-counts.ts), else with
// read-targets.lua (target-reader.ts); and the writes of counters outside a change:
// a new target's creation, derived counters mirrored from PostgreSQL.
import { relationsOf, type CounterValue, type Counts, type Relation, type Target } from "../../domain/model/index.js";
import type { CounterStore, ReadoutRequest } from "../../domain/ports/index.js";
import { batchRead, type RedisClient } from "./client.js";
import { parseCounterHash } from "./counter-hash.js";
import type { Fill, HotCounts, HotTarget } from "./hot-counts.js";
import { authorField, type RedisKeys } from "./keys.js";
import { perNode } from "./per-node.js";
import { ScriptStatus, toError } from "./statuses.js";
import { keepsUseRecord, useScore } from "./use-records.js";
import { createTargetReader, type NodeOf, type Read, type TargetReader, type TargetReaderOptions } from "./target-reader.js";

export interface CounterStoreOptions {
  /**
   * On a cluster, the node serving a key as the client believes: by default ioredis's
   * slot map. Tests pass a wrong one to see refused keys read one by one.
   */
  readonly nodeOf?: NodeOf;
  /** Counts kept in this process's memory, served within their bound; without them every readout reads Redis. */
  readonly hotCounts?: HotCounts;
  /** Where this Redis keeps member indexes, and whom to tell of a viewer's missing one (member-index-store.ts). */
  readonly memberIndexes?: TargetReaderOptions["memberIndexes"];
}

/**
 * Targets this process has seen grown past their first membership generation, per
 * relation, with the newest generation seen, so a viewer's membership is looked up in
 * one round trip; a target that grew since costs a second one. Few targets ever grow
 * (those with hundreds of members); the bound only guards against a pathological spread.
 */
type Grown = Map<string, number>;

const grownKey = (counterKey: string, relation: Relation) => (relation === "like" ? counterKey : `${counterKey}|${relation}`);

function remember(grown: Grown, key: string, generation: number): void {
  if (generation === (grown.get(key) ?? 0)) return;
  if (grown.size >= 100_000) grown.clear();
  if (generation === 0) grown.delete(key);
  else grown.set(key, generation);
}

/** What every readout of one store shares: its reader, the hot counts (if any) and the targets seen grown. */
interface ReadoutState {
  readonly readOnce: TargetReader;
  readonly hotCounts: HotCounts | undefined;
  readonly grown: Grown;
}

/** A read's counters and generations (of every relation of the type) as an entry of the hot counts. */
const hotTarget = (read: Read, relations: readonly Relation[]): HotTarget => ({
  counts: read.counts ?? {},
  generations: Object.fromEntries(relations.map((relation, j) => [relation, read.generations[j] ?? 0])),
});

/**
 * A readout as the reads make it: every relation of the targets' type has its
 * generation read (an entry of the hot counts must serve any later request),
 * but only the relations asked look the viewer up.
 */
interface Plan {
  readonly request: ReadoutRequest;
  readonly asks: readonly boolean[];
}

const planOf = (targets: readonly Target[], request: ReadoutRequest): Plan => {
  const all = relationsOf((targets[0] as Target).type);
  return {
    request: { ...request, relations: all },
    asks: all.map((relation) => request.viewerId !== null && request.relations.includes(relation)),
  };
};

/** One call of readout: its targets, their counter hash keys, its plan, and the answers found so far. */
interface ReadoutCall {
  readonly targets: readonly Target[];
  readonly counterKeys: readonly string[];
  readonly plan: Plan;
  readonly answers: (Read | null)[];
}

/** Whether a read leaves a relation asked unanswered: the target grew past the shards passed. */
const unsure = (read: Read, plan: Plan) => read.unsure.some((u, j) => u && plan.asks[j]);

/** The shards to pass of relation j first: one past the newest generation this process saw. */
const guessShards = ({ grown }: ReadoutState, plan: Plan, counterKey: string, j: number) =>
  plan.asks[j] ? (grown.get(grownKey(counterKey, plan.request.relations[j] as Relation)) ?? 0) + 1 : 0;

/** Notes what a read of target i's counters told (its generations), and keeps it in the hot counts. */
const learn = ({ grown }: ReadoutState, { targets, counterKeys, plan }: ReadoutCall, i: number, read: Read, fill: Fill | undefined) => {
  plan.request.relations.forEach((relation, j) => remember(grown, grownKey(counterKeys[i] as string, relation), read.generations[j] ?? 0));
  fill?.keep(targets[i] as Target, hotTarget(read, plan.request.relations));
};

/**
 * Reads, from Redis and exactly, the targets at `indexes`: counters and the
 * viewer's memberships; a target grown past the shards passed is read again
 * with the generations the read found.
 */
async function readExactly(state: ReadoutState, call: ReadoutCall, indexes: readonly number[]): Promise<void> {
  if (indexes.length === 0) return;
  const { targets, counterKeys, plan, answers } = call;
  const fill = state.hotCounts?.fill(indexes.map((i) => targets[i] as Target));
  try {
    let pending = indexes.map((i) => ({ i, shards: (j: number) => guessShards(state, plan, counterKeys[i] as string, j) }));
    for (let round = 0; pending.length > 0 && round < 3; round++) {
      const batch = pending;
      const reads = await state.readOnce(
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
        learn(state, call, i, read, fill);
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
async function readBesideHeld(state: ReadoutState, call: ReadoutCall, hot: HotCounts, held: readonly (HotTarget | undefined)[]): Promise<void> {
  const { targets, counterKeys, plan, answers } = call;
  const { relations } = plan.request;
  const unheld = targets.flatMap((_, i) => (held[i] ? [] : [i]));
  const fill = state.hotCounts?.fill(unheld.map((i) => targets[i] as Target));
  let confirmed = true;
  const again: number[] = [];
  try {
    const [reads] = await Promise.all([
      state.readOnce(targets, counterKeys, plan.request, {
        counters: (i) => !held[i],
        shards: (i, j) => {
          const entry = held[i];
          if (!entry) return guessShards(state, plan, counterKeys[i] as string, j);
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
        if (confirmed && read && hot.peek(targets[i] as Target) === entry)
          answers[i] = { counts: entry.counts, viewerIn: read.viewerIn, generations: read.generations, unsure: read.unsure };
        else again.push(i);
        return;
      }
      answers[i] = read;
      if (!read) return;
      learn(state, call, i, read, fill);
      if (unsure(read, plan)) again.push(i);
    });
  } finally {
    fill?.end();
  }
  await readExactly(state, call, again);
}

/** Fills a call's answers: from Redis alone, beside the hot counts held, or from the hot counts with Redis for the rest. */
async function readAnswers(state: ReadoutState, call: ReadoutCall): Promise<void> {
  const { hotCounts } = state;
  const { targets, plan, answers } = call;
  const hot = hotCounts && !plan.request.exact && hotCounts.servable() ? hotCounts : null;
  if (!hot) {
    hotCounts?.missed(targets.length);
    await readExactly(
      state,
      call,
      targets.map((_, i) => i),
    );
    return;
  }
  const held = targets.map((target) => hot.get(target));
  if (plan.asks.some(Boolean) && held.some(Boolean)) {
    await readBesideHeld(state, call, hot, held);
    return;
  }
  held.forEach((entry, i) => {
    if (entry) answers[i] = { counts: entry.counts, viewerIn: {}, generations: [], unsure: [] };
  });
  await readExactly(
    state,
    call,
    targets.flatMap((_, i) => (held[i] ? [] : [i])),
  );
}

async function readout(state: ReadoutState, keys: RedisKeys, targets: readonly Target[], request: ReadoutRequest) {
  if (targets.length === 0) return [];
  const call: ReadoutCall = {
    targets,
    counterKeys: targets.map((t) => keys.counters(t)),
    plan: planOf(targets, request),
    answers: new Array<Read | null>(targets.length).fill(null),
  };
  await readAnswers(state, call);
  return call.answers.map((read) => {
    if (!read) return null;
    // Without a viewer every relation asked is answered false, as the port says.
    const viewerIn: Partial<Record<Relation, boolean>> = {};
    for (const relation of request.relations) viewerIn[relation] = read.viewerIn[relation] ?? false;
    return { counts: read.counts ?? {}, viewerIn };
  });
}

async function readCounts(redis: RedisClient, keys: RedisKeys, targets: readonly Target[]) {
  const hashes = await batchRead(
    redis,
    "hgetall",
    targets.map((t) => [keys.counters(t)] as const),
  );
  return hashes.map((hash): Counts | null => (Object.keys(hash).length === 0 ? null : parseCounterHash(hash).counts));
}

async function init(redis: RedisClient, keys: RedisKeys, target: Target, counts: Counts, authorId: bigint | undefined) {
  const fields: (string | number)[] = Object.entries(counts).flat();
  if (authorId !== undefined) fields.push(authorField, authorId.toString());
  const [status] = await redis.initCounters(keys.counters(target), ...fields);
  if (status === ScriptStatus.Applied && keepsUseRecord(target)) await redis.zadd(keys.use(target).key, "NX", useScore(), keys.use(target).member);
  if (status === ScriptStatus.Applied || status === ScriptStatus.Unchanged) return status === ScriptStatus.Applied;
  throw toError("init-counters", status, target);
}

async function mirror(redis: RedisClient, keys: RedisKeys, values: readonly CounterValue[]) {
  const byTarget = new Map<string, { key: string; target: Target; triples: (string | number)[] }>();
  for (const v of values) {
    const key = keys.counters(v.target);
    let entry = byTarget.get(key);
    if (!entry) byTarget.set(key, (entry = { key, target: v.target, triples: [] }));
    entry.triples.push(v.name, v.value, v.seq.toString());
  }
  await perNode(
    redis,
    [...byTarget.values()],
    (t) => [t.key],
    async (group, { declared, named }) => {
      const args: (string | number)[] = [declared.length, ...declared, group.length];
      for (const t of group) args.push(t.triples.length / 3);
      for (const t of group) args.push(...t.triples);
      args.push(...named);
      const [status] = await redis.mirrorCounters(...(args as [number, ...(string | number)[]]));
      if (status !== ScriptStatus.Applied) throw toError("mirror-counters", status, (group[0] as { target: Target }).target);
    },
  );
}

export function createCounterStore(redis: RedisClient, keys: RedisKeys, options: CounterStoreOptions = {}): CounterStore {
  const state: ReadoutState = {
    readOnce: createTargetReader(redis, keys, { nodeOf: options.nodeOf, memberIndexes: options.memberIndexes }),
    hotCounts: options.hotCounts,
    grown: new Map(),
  };
  return {
    read: (targets) => readCounts(redis, keys, targets),
    readout: (targets, request) => readout(state, keys, targets, request),
    init: (target, counts, authorId) => init(redis, keys, target, counts, authorId),
    mirror: (values) => mirror(redis, keys, values),
  };
}
