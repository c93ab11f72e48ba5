// Joining and leaving a target's members: liking and unliking posts and
// comments, collecting posts, following users. Idempotent, exact, at Redis speed.
import { badInput, DomainError, ErrorCode, forbidden, notFound, TargetFullError, UnavailableError } from "../errors.js";
import { rebuildRounds, type CounterService } from "./counters.js";
import type { Counts, MemberPosition, Relation, Target } from "./model/index.js";
import type { MembershipChange, MembershipStore, MemberPageStore, Reachability } from "./ports/index.js";
import type { AcknowledgedChanges } from "./acknowledged-changes.js";
import type { TargetUses } from "./target-uses.js";

export interface MembershipOutcome {
  readonly changed: boolean;
  /** The target's counts right after the change, from the same atomic step. */
  readonly counts: Counts;
}

export interface MembersPage {
  /** Each member's position: who, and when they joined; a client's cursor names one. */
  readonly members: MemberPosition[];
  readonly hasMore: boolean;
}

export interface MembersPageRequest {
  readonly relation: Relation;
  readonly target: Target;
  readonly first: number;
  readonly after: MemberPosition | null;
}

export interface MembershipService {
  /**
   * Makes the user a member of the target's relation (like, collect, follow); a member already is `changed: false`.
   * `answerAtMs`: the request's deadline, which the change applies before or never (MembershipStore.add).
   */
  join(relation: Relation, target: Target, userId: bigint, answerAtMs?: number): Promise<MembershipOutcome>;
  leave(relation: Relation, target: Target, userId: bigint, answerAtMs?: number): Promise<MembershipOutcome>;
  /**
   * Members of each target as PostgreSQL holds them, newest first: `first` at
   * most, after the position `after` (the last position of the page before);
   * a page per request in order, with one query per relation asked. A change
   * shows here once the pipeline persisted it, about a second after it was made.
   */
  members(requests: readonly MembersPageRequest[]): Promise<MembersPage[]>;
}

/**
 * A change touches the target's slot alone: one script call. What lives in
 * other slots (the author's likes received, the user's lists, the ranking) is
 * written by the pipeline once PostgreSQL committed the change.
 */
export interface MembershipServiceDeps {
  readonly memberships: MembershipStore;
  readonly memberPages: MemberPageStore;
  readonly counters: CounterService;
  /** Whether Redis answers: while it does not, a change is refused at once rather than after its timeouts. */
  readonly reachability?: Reachability;
  /** Where a change made is kept a while, in case a Redis failover takes it back (lost-changes.ts). */
  readonly journal?: Pick<AcknowledgedChanges, "record">;
  /** Where a changed target is noted as used, for eviction. */
  readonly uses?: TargetUses;
}

/** How long a client waits before retrying a change refused while Redis is out of reach: about two of its probes. */
const unreachableRetrySeconds = 2;

const verbs: Record<Relation, string> = { like: "likes", collect: "collects", follow: "followers" };

export function createMembershipService(deps: MembershipServiceDeps): MembershipService {
  const { memberships, memberPages, counters, reachability, uses, journal } = deps;

  async function apply(relation: Relation, target: Target, userId: bigint, join: boolean, answerAtMs: number | undefined): Promise<MembershipOutcome> {
    if (relation === "follow" && target.id === userId) throw badInput("userId", "A user cannot follow themself; pass another user's id.");
    if (reachability && !reachability.reachable()) {
      throw new UnavailableError(
        `Redis, where ${verbs[relation]} are counted, cannot be reached: nothing was done; retry in a few seconds.`,
        unreachableRetrySeconds,
      );
    }
    const run = () => (join ? memberships.add(relation, target, userId, answerAtMs) : memberships.remove(relation, target, userId, answerAtMs));
    const attempt = () =>
      run().catch((error: unknown) => {
        if (error instanceof TargetFullError) throw forbidden(`${target.type} ${target.id} takes no more ${verbs[relation]}: it holds the most a target can.`);
        reachability?.failed(error);
        throw error;
      });
    let result: MembershipChange = await attempt();
    // A target dropped again right after its rebuild (a late replay, a reconcile repair) is rebuilt once more.
    for (let round = 0; result.kind === "unloaded"; round++) {
      if (round === rebuildRounds) {
        // Nothing was written: the client may send the change again once the target settles.
        throw new DomainError(ErrorCode.SERVICE_UNAVAILABLE, `The counters of ${target.type} ${target.id} are being repaired; retry shortly.`);
      }
      // Only a target Redis does not hold waits for a rebuild slot: a change of a loaded one never gets here.
      if (!(await counters.rebuild(target, answerAtMs))) throw notFound(target.type, target.id);
      result = await attempt();
    }
    uses?.used([target]);
    if (result.version !== undefined) journal?.record({ target, relation, userId, member: join, version: result.version });
    return { changed: result.changed, counts: result.counts };
  }

  return {
    join: (relation, target, userId, answerAtMs) => apply(relation, target, userId, true, answerAtMs),
    leave: (relation, target, userId, answerAtMs) => apply(relation, target, userId, false, answerAtMs),
    async members(requests) {
      // One row past each page tells whether more follow.
      const found = await memberPages.members(requests.map((r) => ({ relation: r.relation, target: r.target, limit: r.first + 1, after: r.after })));
      return requests.map(({ first }, i) => {
        const positions = found[i] ?? [];
        return {
          members: positions.slice(0, first),
          hasMore: positions.length > first,
        };
      });
    },
  };
}
