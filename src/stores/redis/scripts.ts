// Registers the Lua scripts beside this file as ioredis commands (EVALSHA with
// automatic fall-back to EVAL when the server's script cache was flushed).
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Cluster, Redis, Result } from "ioredis";
import { membershipGenerations } from "./keys.js";
import type { ScriptReply, ScriptStatus } from "./statuses.js";

const scriptsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "scripts");
const includeLine = /^--@include ([a-z-]+)$/gm;

/** Block comments (`--[[ … ]]`) and whole-line comments, each on lines of their own. */
const commentLines = /^[ \t]*--\[\[[\s\S]*?\]\][ \t]*\n|^[ \t]*--(?!\[\[).*\n/gm;

/**
 * A script's text with each `--@include name` line replaced by includes/name.lua.
 * Includes name their own includes; each is inlined once, where first named,
 * so every include states what it needs and none is defined twice. Comments are
 * left out of what Redis is sent: a script's text goes with its first call on
 * each connection (EVAL), and add-member.lua with its comments was over the 16 KB
 * Redis reads at once, so that like cost Redis two reads instead of one.
 */
export function loadScript(name: string): string {
  const inlined = new Set<string>();
  const expand = (text: string): string =>
    text.replace(includeLine, (_, include: string) => {
      if (inlined.has(include)) return "";
      inlined.add(include);
      return expand(readFileSync(path.join(scriptsDir, "includes", `${include}.lua`), "utf8"));
    });
  return expand(readFileSync(path.join(scriptsDir, `${name}.lua`), "utf8")).replace(commentLines, "");
}

/**
 * The membership scripts' reply: a status, then each counter the call named,
 * as held after the change (null where the hash has none), then, for a change
 * made, its version's epoch and microseconds.
 */
export type MembershipReply = [status: number, ...countersThenVersion: (number | string | null)[]];

/**
 * What a script takes, in order, as its header lists it (each `KEYS[i]` and
 * `ARGV[i]` line starts with the name given here; test/unit/stores/redis/
 * script-headers.test.ts holds the two together): short names, the last one
 * `...name` where the header ends in a range (`KEYS[5..n]`, `ARGV[12..]`) of
 * however many values the call passes.
 */
interface Contract {
  readonly keys: readonly string[];
  readonly argv: readonly string[];
}

// Counter hash, outbox, touched-since-rebuild set, the call's receipt, then one shard per generation.
const membershipKeys = ["counters", "outbox", "rebuildWindow", "receipt", "...shards"] as const;
const membershipKeyCount = membershipKeys.length - 1 + membershipGenerations;

/**
 * A script with a fixed key count (numberOfKeys) takes its first key first, and
 * ioredis Cluster routes it by that key, auto-pipelined or not. One without it
 * takes the key count first: see variableKeyCommands for how it is routed, and
 * its `keys` are all the keys it takes. Where `keys` ends in a range the count
 * is given; otherwise it is the number of `keys`.
 */
const definitions = {
  addMember: {
    file: "add-member",
    numberOfKeys: membershipKeyCount,
    keys: membershipKeys,
    argv: [
      "userId",
      "shardCapacity",
      "counterField",
      "targetType",
      "targetId",
      "relationTag",
      "generationField",
      "memberIndex",
      "pendingRecord",
      "indexCapacity",
      "deadline",
      "...answerCounters",
    ],
  },
  removeMember: {
    file: "remove-member",
    numberOfKeys: membershipKeyCount,
    keys: membershipKeys,
    argv: ["userId", "counterField", "targetType", "targetId", "relationTag", "generationField", "deadline", "...answerCounters"],
  },
  initCounters: { file: "init-counters", keys: ["counters"], argv: ["...fieldsAndValues"] },
  mirrorCounters: { file: "mirror-counters", numberOfKeys: undefined, keys: ["...counters"], argv: ["targetCount", "...tripleCounts"] },
  recordViews: { file: "record-views", keys: ["counters", "outbox", "lastFlush"], argv: ["views", "targetType", "targetId", "flush", "deadline"] },
  replayChange: {
    file: "replay-change",
    numberOfKeys: membershipKeyCount,
    keys: membershipKeys,
    argv: [
      "userId",
      "state",
      "epoch",
      "micros",
      "shardCapacity",
      "rebuildEpoch",
      "counterField",
      "generationField",
      "memberIndex",
      "indexCapacity",
      "targetId",
      "targetType",
      "relationTag",
    ],
  },
  replayViews: { file: "replay-views", keys: ["counters", "replayed"], argv: ["epoch", "total", "rebuildEpoch"] },
  finishRebuild: { file: "finish-rebuild", keys: ["counters", "lock", "droppedVersion"], argv: ["token", "...fieldsAndValues"] },
  releaseLock: { file: "release-lock", keys: ["lock"], argv: ["token"] },
  applyListChanges: {
    file: "apply-list-changes",
    numberOfKeys: undefined,
    keys: ["...lists"],
    argv: ["capacity", "committed", "deadline", "listCount", "...changeCounts"],
  },
  loadList: { file: "load-list", keys: ["entries", "horizon", "recent"], argv: ["capacity", "postgresHorizon", "...newestEntries"] },
  readList: { file: "read-list", keys: ["entries", "horizon", "recent"], argv: [] },
  // Member indexes live in users' slots, which a like's script cannot reach on a cluster: standalone only.
  beginMemberIndex: { file: "begin-member-index", keys: ["index"], argv: [], standaloneOnly: true },
  completeMemberIndex: {
    file: "complete-member-index",
    keys: ["index", "pendingRecord", "writers"],
    argv: ["capacity", "overflowed", "protocol", "generation", "...targetIds"],
    standaloneOnly: true,
  },
  registerWriter: {
    file: "register-writer",
    keys: ["writers"],
    argv: ["processId", "protocol", "leaseMs", "mode", "quietMs"],
    standaloneOnly: true,
  },
  noteMembers: { file: "note-members", numberOfKeys: undefined, keys: ["...indexes"], argv: ["targetId", "indexCapacity"], standaloneOnly: true },
  settleMemberIndexes: {
    file: "settle-member-indexes",
    numberOfKeys: undefined,
    keys: ["...pendingRecords"],
    argv: ["...committedChanges"],
    standaloneOnly: true,
  },
  indexRulesOut: { file: "index-rules-out", keys: ["index"], argv: ["generation", "...targetIds"], standaloneOnly: true, readOnly: true },
  evictTarget: {
    file: "evict-target",
    numberOfKeys: undefined,
    keys: ["counters", "droppedVersion", "lastUses", "...toDelete"],
    argv: ["epoch", "micros", "mode", "newestGeneration", "lastUsesMember", "...generationFields"],
  },
  recountMembers: { file: "recount-members", numberOfKeys: undefined, keys: ["counters", "...shards"], argv: ["epoch", "micros", "counterField"] },
  readTargets: {
    file: "read-targets",
    numberOfKeys: undefined,
    keys: ["...counters"],
    argv: ["targetCount", "userId", "fieldCount", "...fields"],
    readOnly: true,
  },
  outboxLength: { file: "outbox-length", numberOfKeys: undefined, keys: ["...streams"], argv: ["...moreStreams"], readOnly: true },
  acknowledgeOutbox: { file: "acknowledge-outbox", numberOfKeys: undefined, keys: ["...streams"], argv: ["group", "streamCount", "...entryCounts"] },
  rebuildMarks: { file: "rebuild-marks", numberOfKeys: undefined, keys: ["...counters"], argv: ["...moreCounters"], readOnly: true },
  heldTargets: { file: "held-targets", numberOfKeys: undefined, keys: ["...counters"], argv: ["...moreCounters"], readOnly: true },
  adoptTarget: { file: "adopt-target", keys: ["counters"], argv: ["epoch", "micros"] },
  chargeBudget: { file: "charge-budget", keys: ["budget"], argv: ["intervalMicros", "limit", "cost"] },
  reportSpending: { file: "report-spending", keys: ["budget"], argv: ["intervalMicros", "limit", "units"] },
  mirrorRanking: { file: "mirror-ranking", keys: ["ranking", "seqs"], argv: ["capacity", "expireAtMs", "...triples"] },
  refreshRanking: {
    file: "refresh-ranking",
    numberOfKeys: undefined,
    keys: ["marker", "hourRanking", "dayRanking", "weekRanking", "...buckets"],
    argv: ["capacity", "hourBuckets", "dayBuckets", "weekBuckets"],
  },
} as const satisfies Record<string, Contract & { file: string; numberOfKeys?: number | undefined; standaloneOnly?: true; readOnly?: true }>;

/** A command's key count where fixed: given where its keys end in a range, else the number of its keys. */
function numberOfKeysOf(definition: (typeof definitions)[keyof typeof definitions]): number | undefined {
  if ("numberOfKeys" in definition) return definition.numberOfKeys;
  // Counted, a range would pass as one key: the call would send the rest of its keys as ARGV.
  if (definition.keys.some((key) => key.startsWith("...")))
    throw new Error(`${definition.file}.lua takes a range of keys, so its definition gives their number`);
  return definition.keys.length;
}

/**
 * The commands whose caller passes the key count first. ioredis Cluster's
 * auto-pipelining groups a call by the first value of its arguments when it does
 * not know the command (autoPipelining.js, getFirstKeyForCommand), which for these
 * is the count: the call joins the pipeline of the node serving the count's slot,
 * and that pipeline, holding keys of two nodes, then fails as a whole. Sent
 * outside auto-pipelining (ClusterOptions.autoPipeliningIgnoredCommands), the call
 * leaves as EVALSHA, whose keys ioredis reads after the count, and is routed by
 * its first key. These are rare background calls (eviction, recount) or, for
 * readTargets, one call per node of a feed, so none loses batching it needs.
 */
export const variableKeyCommands: readonly string[] = Object.entries(definitions)
  .filter(([, definition]) => numberOfKeysOf(definition) === undefined)
  .map(([command]) => command);

/** The script files only a standalone Redis runs (scripts/includes/member-index.lua). */
export const standaloneOnlyScripts: ReadonlySet<string> = new Set(
  Object.values(definitions as Record<string, { file: string; standaloneOnly?: boolean }>)
    .filter((definition) => definition.standaloneOnly === true)
    .map(({ file }) => file),
);

/** Each command's key count, where it is fixed: what its script's header must list (test/unit/stores/redis/script-headers.test.ts). */
export const scriptKeyCounts: ReadonlyMap<string, number> = new Map(
  Object.entries(definitions).flatMap(([command, definition]): [string, number][] => {
    const numberOfKeys = numberOfKeysOf(definition);
    return numberOfKeys === undefined ? [] : [[command, numberOfKeys]];
  }),
);

/** Each command's KEYS and ARGV, as its script's header must list them (test/unit/stores/redis/script-headers.test.ts). */
export const scriptContracts: ReadonlyMap<string, Contract> = new Map(
  Object.entries(definitions).map(([command, { keys, argv }]) => [command, { keys, argv }]),
);

/** Every command defined, with its script file (scripts/<file>.lua). */
export const scriptFiles: ReadonlyMap<string, string> = new Map(Object.entries(definitions).map(([command, { file }]) => [command, file]));

declare module "ioredis" {
  interface RedisCommander<Context> {
    /** scripts/add-member.lua: the counter hash, the outbox, the touched set, the receipt, one member shard per generation, then ARGV. */
    addMember(counters: string, ...keysAndArgs: (string | number)[]): Result<MembershipReply, Context>;
    /** scripts/remove-member.lua: the same keys as addMember, then ARGV. */
    removeMember(counters: string, ...keysAndArgs: (string | number)[]): Result<MembershipReply, Context>;
    /** scripts/init-counters.lua */
    initCounters(key: string, ...fieldsAndValues: (string | number)[]): Result<ScriptReply, Context>;
    /** scripts/mirror-counters.lua: the number of keys, the keys, then ARGV. */
    mirrorCounters(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Result<ScriptReply<number>, Context>;
    /** scripts/record-views.lua: the counter hash, the outbox, the receipt, then views, target type and id. */
    recordViews(
      counters: string,
      outbox: string,
      flushes: string,
      views: number,
      targetType: string,
      targetId: string,
      seq: number,
      deadlineMs: number,
    ): Result<ScriptReply<number>, Context>;
    /** scripts/replay-change.lua: the same keys as addMember, then ARGV. */
    replayChange(counters: string, ...keysAndArgs: (string | number)[]): Result<ScriptReply, Context>;
    /** scripts/replay-views.lua: the counter hash, the views replayed per epoch, then epoch, total and the rebuild's epoch. */
    replayViews(counters: string, replayed: string, epoch: string, total: number, intoEpoch: string): Result<ScriptReply, Context>;
    /** scripts/finish-rebuild.lua: the counter hash, the rebuild lock, the drop's record, the lock's token, then fields and values. */
    finishRebuild(key: string, lock: string, dropped: string, token: string, ...fieldsAndValues: (string | number)[]): Result<ScriptReply, Context>;
    /** scripts/apply-list-changes.lua: the number of keys, the keys, then ARGV. */
    applyListChanges(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Result<ScriptReply<string>, Context>;
    /** scripts/load-list.lua: entries, horizon, recent changes, then ARGV. */
    loadList(entries: string, horizon: string, recent: string, ...args: (string | number)[]): Result<ScriptReply, Context>;
    /** scripts/read-list.lua: the status, then the entries (post, ms, …), the horizon and the records (field, value, …). */
    readList(entries: string, horizon: string, recent: string): Result<[number, string[]?, string?, string[]?], Context>;
    /** scripts/begin-member-index.lua. */
    beginMemberIndex(index: string): Result<ScriptReply, Context>;
    /** scripts/complete-member-index.lua. */
    completeMemberIndex(
      index: string,
      pending: string,
      writers: string,
      capacity: number,
      over: 0 | 1,
      protocol: number,
      generation: number,
      ...targetIds: string[]
    ): Result<ScriptReply, Context>;
    /** scripts/register-writer.lua: the status, then the generation, mixed (0 or 1), and moved (0 or 1) or, asked, the writers behind. */
    registerWriter(
      writers: string,
      processId: string,
      protocol: number,
      leaseMs: number,
      mode: "renew" | "leave" | "ask",
      quietMs: number,
    ): Result<[number, number?, number?, number?], Context>;
    /** scripts/note-members.lua. */
    noteMembers(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Result<ScriptReply, Context>;
    /** scripts/index-rules-out.lua: the member index, the fence generation, then the targets' ids. */
    indexRulesOut(index: string, generation: number, ...targetIds: string[]): Result<ScriptReply<string>, Context>;
    /** scripts/settle-member-indexes.lua: the number of keys, the keys, then a target, epoch and microseconds per key. */
    settleMemberIndexes(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Result<ScriptReply<number>, Context>;
    /** scripts/evict-target.lua: the number of keys, the keys, then ARGV. */
    evictTarget(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Result<ScriptReply, Context>;
    /** scripts/recount-members.lua: the number of keys, the keys, then ARGV. */
    recountMembers(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Result<ScriptReply<number>, Context>;
    /** scripts/release-lock.lua */
    releaseLock(key: string, token: string): Result<ScriptReply, Context>;
    /** scripts/read-targets.lua: the number of keys, the keys, then ARGV. */
    readTargets(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Result<[status: number, text?: string, indexes?: string], Context>;
    /** scripts/outbox-length.lua: the number of keys, the keys, then the other streams. */
    outboxLength(numberOfKeys: number, ...keysAndArgs: string[]): Result<ScriptReply<number>, Context>;
    /** scripts/rebuild-marks.lua: the number of keys, the keys, then the other counter hashes. */
    rebuildMarks(numberOfKeys: number, ...keysAndArgs: string[]): Result<ScriptReply<string>, Context>;
    /** scripts/held-targets.lua: the number of keys, the keys, then the other counter hashes. */
    heldTargets(numberOfKeys: number, ...keysAndArgs: string[]): Result<ScriptReply<string>, Context>;
    /** scripts/adopt-target.lua: the counter hash, then the epoch and microseconds compared. */
    adoptTarget(counters: string, epoch: string, micros: string): Result<ScriptReply, Context>;
    /** scripts/acknowledge-outbox.lua: the number of keys, the keys, then ARGV. */
    acknowledgeOutbox(numberOfKeys: number, ...keysAndArgs: string[]): Result<ScriptReply, Context>;
    /** scripts/charge-budget.lua: the budget, then interval (µs), limit and cost. */
    chargeBudget(
      key: string,
      intervalMicros: number,
      limit: number,
      cost: number,
    ): Result<[status: ScriptStatus, waitMicros: number, aheadMicros: number] | [status: ScriptStatus], Context>;
    /** scripts/report-spending.lua: the budget, then interval (µs), limit and units spent. */
    reportSpending(key: string, intervalMicros: number, limit: number, units: number): Result<ScriptReply<number>, Context>;
    /** scripts/mirror-ranking.lua: the ranking, its seq hash, then capacity, expiry (Unix ms) and member, value, seq triples. */
    mirrorRanking(ranking: string, seqs: string, capacity: number, expireAtMs: number, ...triples: (string | number)[]): Result<ScriptReply<number>, Context>;
    /** scripts/refresh-ranking.lua: the number of keys, the keys, then ARGV. */
    refreshRanking(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Result<ScriptReply, Context>;
  }
}

export function defineScripts(redis: Redis | Cluster): void {
  for (const [command, definition] of Object.entries(definitions)) {
    const { file } = definition;
    const numberOfKeys = numberOfKeysOf(definition);
    const readOnly = "readOnly" in definition && definition.readOnly;
    // Without numberOfKeys the caller passes the key count first (eviction takes a varying number): see variableKeyCommands.
    redis.defineCommand(command, { lua: loadScript(file), readOnly, ...(numberOfKeys === undefined ? {} : { numberOfKeys }) });
  }
}
