// What a reconcile pass compares of each store, the differences it finds and the
// repairs it asks for.
import type { CounterName } from "./counts.js";
import type { Relation } from "./relations.js";
import type { Target } from "./targets.js";

/** A target's members of one relation as Redis holds them, for a reconcile pass. */
export interface RedisTarget {
  readonly relation: Relation;
  readonly target: Target;
  /** The relation's counter on the target. */
  readonly count: number;
  /** Its members, or null when there are more than a reconcile pass loads at once (compared in chunks). */
  readonly members: readonly bigint[] | null;
  /** How many members its shards hold. */
  readonly memberCount: number;
  /** The membership generations whose shards held members: the only ones a walk over its members reads. */
  readonly generations: readonly number[];
  /** Version of the newest change Redis made to the target; -1 when it changed while being read. */
  readonly version: bigint;
  /** Seconds since anything read or wrote the target, before this inspection. */
  readonly idleSeconds: number;
}

/** A target's members of one relation as PostgreSQL holds them, for a reconcile pass. */
export interface DatabaseTarget {
  /** The relation's counter. */
  readonly count: number;
  /** Its members, or null when there are more than a reconcile pass loads at once (compared in chunks). */
  readonly members: readonly bigint[] | null;
  /** Rows of the relation's table. */
  readonly rows: number;
  /** Highest version PostgreSQL applied to the target. */
  readonly version: bigint;
}

/** PostgreSQL's record of the newest change it applied to one user's membership of a target (relation_versions). */
export interface PairRecord {
  /** Whether the user is a member after that change. */
  readonly member: boolean;
  readonly version: bigint;
}

/** A target's relation only PostgreSQL may hold, as one page of a reconcile pass lists it. */
export interface DatabaseCount {
  readonly relation: Relation;
  readonly target: Target;
  /** The relation's counter (0 when there is no counter row). */
  readonly count: number;
  /** Rows of the relation's table. */
  readonly rows: number;
}

/**
 * A target's counters other than membership counts, as a reconcile pass compares
 * them: the derived ones as PostgreSQL's rows say (`truth`), its counter rows and
 * Redis hold them; a post's views as both stores hold them.
 */
export interface CounterSurvey {
  readonly target: Target;
  /** Per derived counter of the type: what PostgreSQL's rows count. */
  readonly truth: Readonly<Partial<Record<CounterName, number>>>;
  /** PostgreSQL's counter rows (0 when absent), with their sequence numbers. */
  readonly database: Readonly<Partial<Record<CounterName, { readonly value: number; readonly seq: bigint }>>>;
  /** Redis's values and sequence numbers, or null when Redis does not hold the target. */
  readonly redis: Readonly<Partial<Record<CounterName, { readonly value: number; readonly seq: bigint }>>> | null;
  /** Redis's version of the target (-1 when unknown) and PostgreSQL's newest, for views. */
  readonly redisVersion: bigint;
  readonly databaseVersion: bigint;
}

export type DifferenceKind =
  | "missingInDatabase"
  | "strayInDatabase"
  | "databaseCounter"
  | "redisCounter"
  /** A derived counter row that does not count PostgreSQL's rows. */
  | "derivedCounter"
  /** A derived counter Redis holds otherwise than PostgreSQL. */
  | "redisDerivedCounter"
  /** Views PostgreSQL holds otherwise than Redis, the target at rest. */
  | "views"
  /** A user's list of liked or collected posts that lists otherwise than PostgreSQL's rows. */
  | "list";

/** What a reconcile pass asks to be fixed; every repair is safe to repeat. */
export type Repair =
  | {
      /** Make PostgreSQL's members of the target's relation what Redis holds, then its counters their number. */
      readonly kind: "alignDatabase";
      readonly relation: Relation;
      readonly target: Target;
      /** Redis's version when compared: a pair changed since is left alone. */
      readonly observedVersion: bigint;
      readonly add: readonly bigint[];
      readonly remove: readonly bigint[];
    }
  | {
      /** Set PostgreSQL's counter of the target's relation to its number of rows. */
      readonly kind: "recountDatabase";
      readonly relation: Relation;
      readonly target: Target;
    }
  | {
      /** Set Redis's counter of the target's relation to its number of members, if unchanged since. */
      readonly kind: "recountRedis";
      readonly relation: Relation;
      readonly target: Target;
      readonly observedVersion: bigint;
    }
  | {
      /** Set PostgreSQL's derived counters of the target to what its rows count, then mirror them into Redis. */
      readonly kind: "recountDerived";
      readonly target: Target;
      readonly names: readonly CounterName[];
    }
  | {
      /** Mirror PostgreSQL's derived counters of the target into Redis as they stand. */
      readonly kind: "mirrorDerived";
      readonly target: Target;
      readonly names: readonly CounterName[];
    }
  | {
      /** Set PostgreSQL's views of a post to Redis's, if no change reached either store since. */
      readonly kind: "alignViews";
      readonly target: Target;
      readonly observedVersion: bigint;
      readonly views: number;
    };

export type RepairKind = Repair["kind"];
