// Each user's newest liked and collected posts, and the indexes of who is a member.
import type { ListPosition, ListedRelation, Relation, TargetType } from "../model/index.js";

/** One change of a user's list: the target joined or left at `at`, with the change's version. */
export interface ListChange {
  readonly targetId: bigint;
  readonly member: boolean;
  readonly version: bigint;
  readonly at: Date;
}

/** The newest change of a target in a user's list that Redis keeps a record of. */
export interface RecentChange {
  readonly member: boolean;
  readonly at: Date;
}

/** A user's list as Redis holds it. */
export interface HeldList {
  /** Its newest entries, newest first, all newer than `horizon`. */
  readonly entries: readonly ListPosition[];
  /**
   * Where Redis's knowledge ends: entries at or before it are read from
   * PostgreSQL. Null when Redis holds every entry there is.
   */
  readonly horizon: ListPosition | null;
  /**
   * Targets whose membership changed recently (two minutes, or longer while
   * PostgreSQL has not committed the change), with the newest change: PostgreSQL
   * may not hold it yet, so its rows for them are not to be believed.
   */
  readonly recent: ReadonlyMap<bigint, RecentChange>;
}

/** Changes to one user's list. */
export interface ListChanges {
  readonly relation: ListedRelation;
  readonly userId: bigint;
  readonly changes: readonly ListChange[];
}

/**
 * Per user, relation and target type, a superset of the targets the user joined,
 * which lets a feed rule out the targets a viewer did not join without asking each
 * (src/stores/redis/member-index-store.ts).
 */
export interface MemberIndexStore {
  /** Targets an index holds at most. */
  readonly capacity: number;
  /**
   * Makes the index exist before PostgreSQL is read for it, so targets rebuilt
   * meanwhile note their members in it.
   */
  begin(relation: Relation, targetType: TargetType, userId: bigint): Promise<void>;
  /**
   * Adds the targets PostgreSQL holds the user a member of to the index and marks it
   * complete, or marks it overflowed when PostgreSQL holds more than the capacity.
   */
  complete(relation: Relation, targetType: TargetType, userId: bigint, targetIds: readonly bigint[], overflowed: boolean): Promise<void>;
}

/** A user's member index as a read asks it (a standalone Redis's: includes/member-index.lua). */
export interface MemberIndexLookup {
  /**
   * Per target in order, whether the user's member index of the relation rules out their
   * membership (it is complete and lacks the target); null when the user has no complete index.
   */
  rulesOut(relation: Relation, targetType: TargetType, userId: bigint, targetIds: readonly bigint[]): Promise<boolean[] | null>;
}

/** A change of a user's membership of a target PostgreSQL has committed. */
export interface CommittedMembership {
  readonly relation: Relation;
  readonly targetType: TargetType;
  readonly targetId: bigint;
  readonly userId: bigint;
  /** The change's version. */
  readonly version: bigint;
}

/**
 * Member indexes as the persist consumer sees them: each records the likes noted in it
 * that PostgreSQL does not hold yet, so that a reload of the index misses none.
 */
export interface MemberIndexHolds {
  /** Forgets the likes the committed changes settle (each, or a later change of its pair); repeats and any order are harmless. */
  settle(committed: readonly CommittedMembership[]): Promise<void>;
}

export interface ListStore {
  /**
   * Applies changes to a user's list, each only when newer than what the list
   * knows of its target. False when Redis does not hold the list (only its record
   * of recent changes moved; a load reads PostgreSQL and that record). `committed`:
   * PostgreSQL holds these changes (the pipeline's write), so their records may expire.
   */
  apply(relation: ListedRelation, userId: bigint, changes: readonly ListChange[], committed: boolean): Promise<boolean>;
  /** Applies a persist batch's committed changes to every list they touch, as `apply` does, in one call per node. */
  applyCommitted(lists: readonly ListChanges[]): Promise<void>;
  /** The user's list, or null when Redis does not hold it (or is loading it). */
  read(relation: ListedRelation, userId: bigint): Promise<HeldList | null>;
  /** The records of recent changes of the list, whether or not Redis holds it. */
  recent(relation: ListedRelation, userId: bigint): Promise<ReadonlyMap<bigint, RecentChange>>;
  /** Takes the list's load lock; the token to release it, or null when another process loads it. */
  lock(relation: ListedRelation, userId: bigint, ttlMs: number): Promise<string | null>;
  unlock(relation: ListedRelation, userId: bigint, token: string): Promise<void>;
  /** Empties the list and marks it loading: changes arriving from now on are kept. Then read PostgreSQL, then `finish`. */
  begin(relation: ListedRelation, userId: bigint): Promise<void>;
  /** Joins PostgreSQL's newest entries (and where its knowledge ends) to the changes that arrived since `begin`. */
  finish(relation: ListedRelation, userId: bigint, entries: readonly ListPosition[], horizon: ListPosition | null): Promise<void>;
}

/** One user's list of one relation. */
export interface ListRef {
  readonly relation: ListedRelation;
  readonly userId: bigint;
}
