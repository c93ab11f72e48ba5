// What a reconcile pass reads of each store, page by page.
import type {
  CounterName,
  CounterSurvey,
  CounterValue,
  DatabaseCount,
  DatabaseTarget,
  ListPosition,
  PairRecord,
  RedisTarget,
  Relation,
  Repair,
  Target,
} from "../model/index.js";
import type { HeldList, ListRef } from "./lists.js";

/** A relation of a target, as a reconcile pass compares it. */
export interface RelationTarget {
  readonly relation: Relation;
  readonly target: Target;
}

export interface DatabaseReconcileStore {
  /**
   * The relation's counter, rows and the target's highest applied version, for each
   * item in order, with its members where it has at most `memberLimit` rows (null otherwise).
   */
  read(items: readonly RelationTarget[], memberLimit: number): Promise<DatabaseTarget[]>;
  /** The members with ids above `afterUser`, lowest first, at most `limit`: one keyset page. */
  membersAfter(item: RelationTarget, afterUser: bigint, limit: number): Promise<bigint[]>;
  /** Which of `users` are members, in order. */
  membersAmong(item: RelationTarget, users: readonly bigint[]): Promise<boolean[]>;
  /** Per list, PostgreSQL's newest `limit` rows of the user's relation to posts, newest first. */
  newestListed(lists: readonly ListRef[], limit: number): Promise<ListPosition[][]>;
  /** PostgreSQL's record of the newest change applied to each of `users`' memberships of the item, for those it has one of. */
  pairRecords(item: RelationTarget, users: readonly bigint[]): Promise<Map<bigint, PairRecord>>;
  /** The next page of relations of targets with members or a counter, in (type, id, relation) order, after `after`. */
  page(after: RelationTarget | null, limit: number): Promise<DatabaseCount[]>;
  /** Relations of targets with members or a counter, for progress estimates. */
  countTargets(): Promise<number>;
  /**
   * The next page of targets of every type, in (type, id) order after `after`, with
   * what their derived counters should be and are, and their views and version.
   */
  counterPage(after: Target | null, limit: number): Promise<Omit<CounterSurvey, "redis" | "redisVersion">[]>;
  /** Targets whose counters counterPage walks, for progress estimates. */
  countCounterTargets(): Promise<number>;
  /**
   * Applies a repair to PostgreSQL; safe to repeat. Answers the derived counters it
   * set, for Redis to mirror.
   */
  repair(repair: Exclude<Repair, { kind: "recountRedis" | "mirrorDerived" }>): Promise<CounterValue[]>;
  /** PostgreSQL's derived counters of a target as they stand, with their sequence numbers. */
  derived(target: Target, names: readonly CounterName[]): Promise<CounterValue[]>;
}

/** A target a reconcile pass could not compare because Redis is ahead of PostgreSQL. */
export interface InFlightTarget {
  readonly target: Target;
  readonly redisVersion: bigint;
  readonly databaseVersion: bigint;
}

/** One page of a walk over the targets Redis holds. */
export interface RedisTargetPage {
  readonly targets: Target[];
  /** Where the walk goes on, or null when it is complete. */
  readonly cursor: string | null;
}

export interface RedisReconcileStore {
  /** The next page of targets Redis holds. */
  scan(cursor: string | null, count: number): Promise<RedisTargetPage>;
  /**
   * Each item's count, member count and version, with its members where it has at
   * most `memberLimit` (null where Redis no longer holds the target).
   */
  survey(items: readonly RelationTarget[], memberLimit: number): Promise<(RedisTarget | null)[]>;
  /** survey() with every member loaded, for targets known to be small. */
  inspect(items: readonly RelationTarget[]): Promise<((RedisTarget & { readonly members: readonly bigint[] }) | null)[]>;
  /**
   * One bounded piece of a walk over every member of the item's shards of
   * `generations`: members from whole shards, starting at shard
   * `from`, until at least `atLeast` (or the shards run out); `next` is where the walk goes on, null at the end.
   */
  membersFrom(item: RelationTarget, generations: readonly number[], from: number, atLeast: number): Promise<{ members: bigint[]; next: number | null }>;
  /** Which of `users` the item's shards of `generations` hold, in order. */
  holdsMembers(item: RelationTarget, generations: readonly number[], users: readonly bigint[]): Promise<boolean[]>;
  /** The target's version now (-1 when Redis no longer holds it), to tell whether it changed during a walk. */
  version(target: Target): Promise<bigint>;
  /**
   * Notes that each target was found in flight at these versions and answers, per target,
   * in how many passes in a row it was found so (1 when its versions moved since).
   * Kept in Redis, so it spans processes and passes.
   */
  noteInFlight(targets: readonly InFlightTarget[]): Promise<number[]>;
  /** Which targets Redis holds. */
  holds(targets: readonly Target[]): Promise<boolean[]>;
  /** Sets the relation's counter to the member count if the target is unchanged since `observedVersion`. */
  recount(item: RelationTarget, observedVersion: bigint): Promise<"recounted" | "changed" | "absent">;
  /**
   * The counters of each target other than membership counts, with the sequence
   * numbers of the derived ones, and the target's version (null where Redis does not hold it).
   */
  counters(targets: readonly Target[]): Promise<({ readonly values: CounterSurvey["redis"] & object; readonly version: bigint } | null)[]>;
  /** Keys Redis holds, for progress estimates. */
  size(): Promise<number>;
  /** The next page of users' lists Redis holds. */
  scanLists(cursor: string | null, count: number): Promise<{ readonly lists: readonly ListRef[]; readonly cursor: string | null }>;
  /**
   * Each list's entries and horizon as Redis holds them, without keeping the list
   * longer; null where it is not held, being loaded, or was loaded again while read.
   */
  readLists(lists: readonly ListRef[]): Promise<(Omit<HeldList, "recent"> | null)[]>;
  /** Which of `targetIds` the list keeps a record of a recent change of (those speak for their posts). */
  listRecords(list: ListRef, targetIds: readonly bigint[]): Promise<boolean[]>;
  /** Drops the list's entries and horizon (its records stay), so its next read loads it from PostgreSQL. */
  dropList(list: ListRef): Promise<void>;
}
