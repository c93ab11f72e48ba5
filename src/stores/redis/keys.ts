// Every Redis key is built here and nowhere else (Lua scripts receive theirs in KEYS).
//
// Layout (p = partition of the target, a hash tag so one target's keys share a slot):
//   cnt:{p}:<type>:<id>            hash: all counters of the target, plus bookkeeping fields; the same name
//                                  is the sharded pub/sub channel announcing that its counts changed (count-changes.ts)
//   lk:{p}:<type>:<id>:<g>:<s>     set: likers in membership generation g, shard s (other
//                                  relations: their own prefix, relations.ts; cl collectors, fw followers)
//   ob:{p}                         stream: outbox of changes in partition p, read by the relay
//   rt:{p}:<type>:<id>[:<tag>]     hash: per user, the newest change (epoch:micros) of a relation
//                                  known since a rebuild (scripts/includes/rebuild-window.lua); likes untagged
//   rv:{p}:post:<id>               hash: per earlier epoch, the views a rebuilt post holds of it (scripts/replay-views.lua)
//   vf:{p}:post:<id>:<sender>      string: the last flush of views the post took from one process, kept 10 min (scripts/record-views.lua)
//   dr:{p}:<type>:<id>             string: the version a dropped target last stamped (epoch:micros), kept an hour, for its rebuild
//   rbl:{p}:<type>:<id>            string: lock held by the process rebuilding the target from PostgreSQL
//   tu:{p}                         sorted set: the targets of partition p Redis holds (members '<type>:<id>'), scored by
//                                  their last use in Unix seconds (a read or a change, never a reconcile pass's look)
//   rc:{p}:<operation>             string: the status a write first answered, kept 60 s (scripts/includes/receipts.lua)
//   ul:{p}:user:<id>:<tag>         sorted set: a user's newest liked (l) or collected (c) posts, scored by time
//   uh:{p}:user:<id>:<tag>         string: where that list's knowledge ends (scripts/load-list.lua)
//   ur:{p}:user:<id>:<tag>         hash: that list's recent changes, per post, and how many PostgreSQL lacks (scripts/apply-list-changes.lua)
//   ulk:{p}:user:<id>:<tag>        string: lock held by the process loading that list from PostgreSQL
//   um:{p}:user:<id>:<tag>:<type>  set: ids of the targets of one type a user joined in one relation, a superset of
//                                  their memberships, with marks 0 (complete) and -1 (overflowed); standalone only
//                                  (scripts/includes/member-index.lua)
//   up:{p}:user:<id>:<tag>:<type>  hash: that index's likes not yet in PostgreSQL, target id to version (epoch:micros)
//   writers                        hash: the processes writing, with their versions' protocol and leases, and the
//                                  member indexes' fence generation (index-fence.ts); standalone only
//   pq:{pq}:<sha256>               string: the text of a persisted query (APQ), expiring unless read (persisted-query-store.ts)
//   pq:{pq}:index                  sorted set: those hashes by their last registration or read in ms, to bound how many are kept
//   reconcile:lock                 string: lock held by the worker running a scheduled reconcile pass
//   reconcile:tick:<ms>            string: a scheduled reconcile tick, claimed by the worker that runs its pass
//   rif:{p}:<type>:<id>            string: versions at which reconcile passes found the target in flight, and how many in a row
//   rl:{<budget>:<subject>}        string: a rate budget's theoretical arrival time (scripts/charge-budget.lua, report-spending.lua); its own slot
//   users:registered               sharded pub/sub channel, no key: ids of users just registered (user-announcements.ts)
//
// The hot ranking (hotPosts) shares one hash tag, {hot}, so one script can union a
// window's buckets; the pipeline writes it once per batch, never once per like:
//   hot:{hot}:b:<span>:<start ms>  sorted set: a time bucket's top posts by likes given in it and standing
//                                  (members: post ids zero-padded to 20 digits, so equal scores rank newest first)
//   hot:{hot}:bs:<span>:<start ms> hash: per member of that bucket, the seq of the value held (scripts/mirror-ranking.lua)
//   hot:{hot}:all, hot:{hot}:alls  sorted set and seq hash of the same kind: posts by like count (window ALL)
//   hot:{hot}:w:<window>           sorted set: a window's ranking, the union of its buckets (scripts/refresh-ranking.lua)
//   hot:{hot}:ready                string: set once the ranking was rebuilt from PostgreSQL; gone (a flush) means rebuild
//   hot:{hot}:lock                 string: lock held by the process rebuilding the ranking
//
// Membership grows by generations instead of a fixed shard count, so small
// targets use one small set and big ones never put more than
// `shardCapacity` members in a key: generation g has FANOUT^g shards, and a
// user's shard in it is hash(user) mod FANOUT^g. New members go to the newest
// generation; a lookup checks generations 0..newest (see scripts/add-member.lua).
import { createHash, randomBytes } from "node:crypto";
import {
  decimalIdSource,
  type BucketedWindow,
  type BucketSpan,
  type ListedRelation,
  type Relation,
  type Target,
  type TargetType,
} from "../../domain/model/index.js";
import { relationLayouts } from "./relations.js";

export const membershipFanout = 8;
export const membershipGenerations = 6;
/**
 * Redis keeps a set of integers as a compact intset (4 bytes a member for ids
 * below 2^31) up to `set-max-intset-entries`, 512 by default. Shards stay at
 * that size so the default server configuration keeps them compact; it is far
 * under the 10,000-member bound on any key.
 */
export const defaultShardCapacity = 512;

/** Hash field of the counter hash that holds the newest generation of the likers (other relations: relations.ts). */
export const generationField = relationLayouts.like.generationField;
/** Hash field of a post's or comment's counter hash that holds its author's id. */
export const authorField = "author";
/** Hash field that holds the microseconds of the target's latest change (scripts/includes/append-event.lua). */
export const versionField = "ver";
/** Hash field that holds the epoch the target stamps its changes in (src/stores/versions.ts); absent means 0. */
export const epochField = "ep";
/** Hash field that holds when the hash was rebuilt from PostgreSQL, in microseconds. */
export const rebuiltAtField = "rb";
/** Hash field that holds the snapshot mark of the rebuild (what PostgreSQL had committed), for late replays. */
export const snapshotMarkField = "mk";
/** Hash field of a post that holds the views counted in its current epoch (scripts/record-views.lua). */
export const epochViewsField = "vt";
/** Hash field that holds the replication history the target was loaded under (scripts/includes/history.lua). */
export const historyField = "rh";
/** Prefix of the hash field holding the sequence number of a derived counter's value (scripts/mirror-counters.lua). */
export const seqFieldPrefix = "s:";
/** The counter hash's fields that are not counters; scripts/includes/hash-fields.lua names the same. */
export const bookkeepingFields: ReadonlySet<string> = new Set([
  ...Object.values(relationLayouts).map((r) => r.generationField),
  authorField,
  versionField,
  epochField,
  rebuiltAtField,
  snapshotMarkField,
  epochViewsField,
  historyField,
]);

export function isBookkeepingField(field: string): boolean {
  return bookkeepingFields.has(field) || field.startsWith(seqFieldPrefix);
}

/** 32-bit finalizer of MurmurHash3: spreads sequential user ids evenly over shards. */
export function mix32(value: bigint): number {
  let h = Number(BigInt.asUintN(32, value ^ (value >> 32n)));
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * An id per call, unique enough for a receipt's minute: 96 random bits,
 * drawn from a pool because one randomBytes call per like cost a few percent.
 */
let pool = Buffer.alloc(0);
let poolOffset = 0;
function operationId(): string {
  if (poolOffset + 12 > pool.length) {
    pool = randomBytes(12 * 1024);
    poolOffset = 0;
  }
  poolOffset += 12;
  return pool.toString("base64url", poolOffset - 12, poolOffset);
}

export interface RedisKeys {
  readonly partitions: number;
  partitionOf(target: Target): number;
  counters(target: Target): string;
  /** Per user, the newest version of their change of `relation` known since the target's rebuild. */
  touched(target: Target, relation: Relation): string;
  /** Per earlier epoch, the views a rebuilt post holds of it. */
  viewsReplayed(target: Target): string;
  /** The number of the last flush of views the post took from `sender` (a process). */
  viewFlushes(target: Target, sender: string): string;
  /**
   * The receipt of one write to the target, in the target's slot: under a fresh
   * operation id per call, or under the caller's when it retries a write itself.
   */
  receipt(target: Target, operation?: string): string;
  /** Where a dropped target leaves the version it last stamped. */
  dropped(target: Target): string;
  /** The lock of a target's rebuild. */
  rebuildLock(target: Target): string;
  /** Where reconcile passes note the target in flight, to tell a stuck target. */
  inFlight(target: Target): string;
  /** The last use of the target: a sorted set of its partition, and the target's member in it. */
  use(target: Target): { readonly key: string; readonly member: string };
  /** The sorted set of the last uses of one partition's targets. */
  usesOf(partition: number): string;
  /** The target a member of a uses set names, or null. */
  parseUse(member: string): Target | null;
  /** The lock of the scheduled reconcile pass, so one worker runs it at a time. */
  reconcileLock(): string;
  /** The registry of the processes writing, and the member indexes' fence (index-fence.ts). */
  writers(): string;
  /**
   * A persisted query's text, and the sorted set of every hash held. One hash tag: the
   * set and its entries share a slot, so they are trimmed together on a cluster.
   */
  persistedQuery(hash: string): string;
  persistedQueryIndex(): string;
  /** Where the claims of scheduled reconcile ticks go: the tick's time in milliseconds follows. */
  reconcileTickPrefix(): string;
  /**
   * A rate budget of one subject (a user id, an address, a username). Subjects
   * other than short plain words are hashed, so a caller's text never shapes the
   * key (a `}` would move its hash tag) and long names cost no memory.
   */
  rateBudget(budget: string, subject: string): string;
  /** The outbox stream a target's changes are appended to. */
  outbox(target: Target): string;
  /** The outbox stream of one partition. */
  outboxOf(partition: number): string;
  /** Every partition's outbox stream, in partition order. */
  outboxes(): string[];
  /** SCAN pattern that matches every counter hash. */
  readonly countersPattern: string;
  /** SCAN pattern that matches every member index. */
  readonly memberIndexPattern: string;
  /** The target a counter hash key belongs to, or null for any other key. */
  parseCounters(key: string): Target | null;
  /** The member shard of `userId` in generation `generation`. */
  memberShard(relation: Relation, target: Target, userId: bigint, generation: number): string;
  /** memberShard for one user over many targets, hashing the user once. */
  memberShardsOf(relation: Relation, userId: bigint): (target: Target, generation: number) => string;
  /** The user's shard in every generation, oldest first: the KEYS a membership script needs. */
  memberShards(relation: Relation, target: Target, userId: bigint): string[];
  /** Every shard of one generation, in shard order. */
  generationShards(relation: Relation, target: Target, generation: number): string[];
  /** A user's list of a relation: its entries, where its knowledge ends, its recent changes, the lock of its load. */
  list(relation: ListedRelation, userId: bigint): { readonly entries: string; readonly horizon: string; readonly recent: string; readonly lock: string };
  /** The targets of one type a user joined in one relation (scripts/includes/member-index.lua). */
  memberIndex(relation: Relation, targetType: TargetType, userId: bigint): string;
  /** That index's pending record: the likes noted in it PostgreSQL does not hold yet. */
  memberPending(relation: Relation, targetType: TargetType, userId: bigint): string;
  /** The hot ranking's keys, all in one slot. */
  readonly ranking: RankingKeys;
  /** The sharded pub/sub channel on which each new user's id is announced to every API process. */
  readonly userAnnouncements: string;
}

export interface RankingKeys {
  /** A time bucket's ranking and its seq hash. */
  bucket(span: BucketSpan, startMs: number): { readonly ranking: string; readonly seqs: string };
  /** Posts by like count and its seq hash. */
  readonly all: { readonly ranking: string; readonly seqs: string };
  window(window: BucketedWindow): string;
  readonly ready: string;
  readonly lock: string;
}

const rankingKeys: RankingKeys = {
  bucket: (span, startMs) => ({ ranking: `hot:{hot}:b:${span}:${startMs}`, seqs: `hot:{hot}:bs:${span}:${startMs}` }),
  all: { ranking: "hot:{hot}:all", seqs: "hot:{hot}:alls" },
  window: (window) => `hot:{hot}:w:${window}`,
  ready: "hot:{hot}:ready",
  lock: "hot:{hot}:lock",
};

/** Subjects used in a budget's key as they are: ids, IPv4 and IPv6 addresses, usernames. */
const plainSubject = /^[A-Za-z0-9_.:-]{1,64}$/;

/** What every counter hash's name starts with: the prefix Redis tells writes of (count-invalidations.ts). */
export const countersPrefix = "cnt:";

const countersKey = new RegExp(`^cnt:\\{\\d+\\}:(post|comment|user):(${decimalIdSource})$`);
const useMember = new RegExp(`^(post|comment|user):(${decimalIdSource})$`);

export function createRedisKeys(partitions: number): RedisKeys {
  const outboxOf = (partition: number) => `ob:{${partition}}`;
  const bigPartitions = BigInt(partitions);
  const partitionOf = (target: Target) => Number(target.id % bigPartitions);
  const base = (prefix: string, target: Target) => `${prefix}:{${partitionOf(target)}}:${target.type}:${target.id}`;
  const shardOf = (relation: Relation, hash: number) => (target: Target, generation: number) =>
    `${base(relationLayouts[relation].shardPrefix, target)}:${generation}:${hash % membershipFanout ** generation}`;

  return {
    partitions,
    partitionOf,
    counters: (target) => base("cnt", target),
    outbox: (target) => outboxOf(partitionOf(target)),
    outboxOf,
    touched: (target, relation) => (relation === "like" ? base("rt", target) : `${base("rt", target)}:${relationLayouts[relation].tag}`),
    viewsReplayed: (target) => base("rv", target),
    viewFlushes: (target, sender) => `${base("vf", target)}:${sender}`,
    dropped: (target) => base("dr", target),
    receipt: (target, operation) => `rc:{${partitionOf(target)}}:${operation ?? operationId()}`,
    inFlight: (target) => base("rif", target),
    use: (target) => ({ key: `tu:{${partitionOf(target)}}`, member: `${target.type}:${target.id}` }),
    usesOf: (partition) => `tu:{${partition}}`,
    parseUse(member) {
      const match = useMember.exec(member);
      return match ? { type: match[1] as TargetType, id: BigInt(match[2] as string) } : null;
    },
    reconcileLock: () => "reconcile:lock",
    writers: () => "writers",
    persistedQuery: (hash) => `pq:{pq}:${hash}`,
    persistedQueryIndex: () => "pq:{pq}:index",
    reconcileTickPrefix: () => "reconcile:tick:",
    rateBudget: (budget, subject) =>
      `rl:{${budget}:${plainSubject.test(subject) ? subject : createHash("sha256").update(subject).digest("base64url").slice(0, 22)}}`,
    rebuildLock: (target) => base("rbl", target),
    outboxes: () => Array.from({ length: partitions }, (_, p) => outboxOf(p)),
    countersPattern: "cnt:*",
    memberIndexPattern: "um:*",
    parseCounters(key) {
      const match = countersKey.exec(key);
      return match ? { type: match[1] as TargetType, id: BigInt(match[2] as string) } : null;
    },
    memberShard: (relation, target, userId, generation) => shardOf(relation, mix32(userId))(target, generation),
    memberShardsOf: (relation, userId) => shardOf(relation, mix32(userId)),
    memberShards: (relation, target, userId) => {
      const shard = shardOf(relation, mix32(userId));
      return Array.from({ length: membershipGenerations }, (_, g) => shard(target, g));
    },
    generationShards: (relation, target, generation) => {
      const prefix = `${base(relationLayouts[relation].shardPrefix, target)}:${generation}:`;
      return Array.from({ length: membershipFanout ** generation }, (_, s) => prefix + s);
    },
    list: (relation, userId) => {
      const user = { type: "user", id: userId } as const;
      const tag = relationLayouts[relation].tag;
      return {
        entries: `${base("ul", user)}:${tag}`,
        horizon: `${base("uh", user)}:${tag}`,
        recent: `${base("ur", user)}:${tag}`,
        lock: `${base("ulk", user)}:${tag}`,
      };
    },
    memberIndex: (relation, targetType, userId) => `${base("um", { type: "user", id: userId })}:${relationLayouts[relation].tag}:${targetType}`,
    memberPending: (relation, targetType, userId) => `${base("up", { type: "user", id: userId })}:${relationLayouts[relation].tag}:${targetType}`,
    ranking: rankingKeys,
    userAnnouncements: "users:registered",
  };
}
