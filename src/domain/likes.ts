// Liking and unliking posts and comments: idempotent, exact, at Redis speed.
import { badInput, forbidden, notFound, TargetFullError } from "../errors.js";
import { rebuildRounds, type CounterService } from "./counters.js";
import { maxId } from "./ids.js";
import type { Counts, LikeableTarget, LikerPosition } from "./model.js";
import type { LikeHistoryStore, LikeStore, MembershipChange } from "./ports.js";

export interface LikeOutcome {
  readonly changed: boolean;
  /** The target's counts right after the change, from the same atomic step. */
  readonly counts: Counts;
}

export interface Liker {
  readonly userId: bigint;
  readonly cursor: string;
}

export interface LikeService {
  like(target: LikeableTarget, userId: bigint): Promise<LikeOutcome>;
  unlike(target: LikeableTarget, userId: bigint): Promise<LikeOutcome>;
  /**
   * Likers of each target as PostgreSQL holds them, newest like first: `first` at
   * most, after the position `after` (a decoded cursor, see `decodeLikerCursor`);
   * a page per request in order, with one query for them all. A like shows here
   * once the pipeline persisted it, about a second after it was made.
   */
  likers(requests: readonly LikersPageRequest[]): Promise<LikersPage[]>;
}

export interface LikersPage {
  readonly likers: Liker[];
  readonly hasMore: boolean;
}

export interface LikersPageRequest {
  readonly target: LikeableTarget;
  readonly first: number;
  readonly after: LikerPosition | null;
}

export function encodeLikerCursor(p: LikerPosition): string {
  return Buffer.from(`l:${p.at.getTime()}:${p.userId}`).toString("base64url");
}

const lastMillisecondOf9999 = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

export function decodeLikerCursor(cursor: string): LikerPosition {
  const match = /^l:(\d{1,15}):([1-9]\d{0,18})$/.exec(Buffer.from(cursor, "base64url").toString());
  // PostgreSQL's timestamps end with the year 9999 (and so does the ISO text the store sends).
  if (!match || Number(match[1]) > lastMillisecondOf9999 || BigInt(match[2] as string) > maxId) {
    throw badInput("after", "after is not a likers cursor this service issued; pass a pageInfo.endCursor back unchanged.");
  }
  return { at: new Date(Number(match[1])), userId: BigInt(match[2] as string) };
}

export function createLikeService(deps: { likeStore: LikeStore; likeHistory: LikeHistoryStore; counters: CounterService }): LikeService {
  const { likeStore, likeHistory, counters } = deps;

  async function apply(
    target: LikeableTarget,
    userId: bigint,
    run: (t: LikeableTarget, u: bigint) => Promise<MembershipChange>,
  ): Promise<LikeOutcome> {
    const attempt = () =>
      run(target, userId).catch((error: unknown) => {
        if (error instanceof TargetFullError) throw forbidden(`${target.type} ${target.id} takes no more likes: it holds the most likers a target can.`);
        throw error;
      });
    let result = await attempt();
    // A target dropped again right after its rebuild (a late replay, a reconcile repair) is rebuilt once more.
    for (let round = 0; result.kind === "unloaded"; round++) {
      if (round === rebuildRounds) throw new Error(`Counters of ${target.type} ${target.id} left Redis ${rebuildRounds} times right after being loaded.`);
      if (!(await counters.rebuild(target))) throw notFound(target.type, target.id);
      result = await attempt();
    }
    return { changed: result.changed, counts: result.counts };
  }

  return {
    like: (target, userId) => apply(target, userId, (t, u) => likeStore.like(t, u)),
    unlike: (target, userId) => apply(target, userId, (t, u) => likeStore.unlike(t, u)),
    async likers(requests) {
      // One row past each page tells whether more follow.
      const found = await likeHistory.likers(requests.map((r) => ({ target: r.target, limit: r.first + 1, after: r.after })));
      return requests.map(({ first }, i) => {
        const positions = found[i] ?? [];
        return {
          likers: positions.slice(0, first).map((p) => ({ userId: p.userId, cursor: encodeLikerCursor(p) })),
          hasMore: positions.length > first,
        };
      });
    },
  };
}
