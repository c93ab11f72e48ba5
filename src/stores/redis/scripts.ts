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

// Counter hash, outbox, touched-since-rebuild set, the call's receipt, one shard per generation.
const membershipKeys = 4 + membershipGenerations;

/**
 * A script with a fixed key count (numberOfKeys) takes its first key first, and
 * ioredis Cluster routes it by that key, auto-pipelined or not. One without it
 * takes the key count first: see variableKeyCommands for how it is routed.
 */
const definitions = {
  addMember: { file: "add-member", numberOfKeys: membershipKeys },
  removeMember: { file: "remove-member", numberOfKeys: membershipKeys },
  initCounters: { file: "init-counters", numberOfKeys: 1 },
  mirrorCounters: { file: "mirror-counters", numberOfKeys: undefined },
  recordViews: { file: "record-views", numberOfKeys: 3 },
  replayChange: { file: "replay-change", numberOfKeys: membershipKeys },
  replayViews: { file: "replay-views", numberOfKeys: 2 },
  finishRebuild: { file: "finish-rebuild", numberOfKeys: 3 },
  releaseLock: { file: "release-lock", numberOfKeys: 1 },
  applyListChanges: { file: "apply-list-changes", numberOfKeys: undefined },
  loadList: { file: "load-list", numberOfKeys: 3 },
  readList: { file: "read-list", numberOfKeys: 3 },
  // Member indexes live in users' slots, which a like's script cannot reach on a cluster: standalone only.
  beginMemberIndex: { file: "begin-member-index", numberOfKeys: 1, standaloneOnly: true },
  completeMemberIndex: { file: "complete-member-index", numberOfKeys: 3, standaloneOnly: true },
  registerWriter: { file: "register-writer", numberOfKeys: 1, standaloneOnly: true },
  noteMembers: { file: "note-members", numberOfKeys: undefined, standaloneOnly: true },
  settleMemberIndexes: { file: "settle-member-indexes", numberOfKeys: undefined, standaloneOnly: true },
  indexRulesOut: { file: "index-rules-out", numberOfKeys: 1, standaloneOnly: true, readOnly: true },
  evictTarget: { file: "evict-target", numberOfKeys: undefined },
  recountMembers: { file: "recount-members", numberOfKeys: undefined },
  readTargets: { file: "read-targets", numberOfKeys: undefined, readOnly: true },
  outboxLength: { file: "outbox-length", numberOfKeys: undefined, readOnly: true },
  acknowledgeOutbox: { file: "acknowledge-outbox", numberOfKeys: undefined },
  rebuildMarks: { file: "rebuild-marks", numberOfKeys: undefined, readOnly: true },
  heldTargets: { file: "held-targets", numberOfKeys: undefined, readOnly: true },
  adoptTarget: { file: "adopt-target", numberOfKeys: 1 },
  chargeBudget: { file: "charge-budget", numberOfKeys: 1 },
  reportSpending: { file: "report-spending", numberOfKeys: 1 },
  mirrorRanking: { file: "mirror-ranking", numberOfKeys: 2 },
  refreshRanking: { file: "refresh-ranking", numberOfKeys: undefined },
} as const;

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
  .filter(([, definition]) => definition.numberOfKeys === undefined)
  .map(([command]) => command);

/** The script files only a standalone Redis runs (scripts/includes/member-index.lua). */
export const standaloneOnlyScripts: ReadonlySet<string> = new Set(
  Object.values(definitions as Record<string, { file: string; standaloneOnly?: boolean }>)
    .filter((definition) => definition.standaloneOnly === true)
    .map(({ file }) => file),
);

/** Every command defined, with its script file (scripts/<file>.lua). */
/** Each command's key count, where it is fixed: what its script's header must list (test/unit/stores/redis/script-headers.test.ts). */
export const scriptKeyCounts: ReadonlyMap<string, number> = new Map(
  Object.entries(definitions).flatMap(([command, { numberOfKeys }]): [string, number][] => (numberOfKeys === undefined ? [] : [[command, numberOfKeys]])),
);

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
    const { file, numberOfKeys } = definition;
    const readOnly = "readOnly" in definition && definition.readOnly;
    // Without numberOfKeys the caller passes the key count first (eviction takes a varying number): see variableKeyCommands.
    redis.defineCommand(command, { lua: loadScript(file), readOnly, ...(numberOfKeys === undefined ? {} : { numberOfKeys }) });
  }
}
