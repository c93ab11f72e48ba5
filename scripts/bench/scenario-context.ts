// What every HTTP scenario is handed, the requests they share, and the
// unmeasured load each runs first.
import type { Relation } from "../../src/domain/model/index.js";
import type { Dataset } from "./dataset.js";
import type { RunningService } from "./harness.js";
import { runLoad, type Pair, type Request } from "./http-load.js";
import type { BenchRedis } from "./private-redis.js";

export interface ScenarioContext {
  readonly data: Dataset;
  readonly redis: BenchRedis;
  readonly service: RunningService;
  readonly mode: string;
  readonly durationSeconds: number;
  readonly warmUpSeconds: number;
  /** Bearer tokens by user id. */
  readonly token: (userId: bigint) => string;
  /** Fresh (user, post) pairs no scenario has used yet. */
  readonly fresh: FreshPairs;
}

export const random = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)] as T;

/** `n` distinct random items. */
export function sample<T>(items: readonly T[], n: number): T[] {
  const picked = new Set<T>();
  while (picked.size < n) picked.add(random(items));
  return [...picked];
}

const feedQuery = "query($ids: [ID!]!) { posts(ids: $ids) { id counts { likes reads comments } viewerHasLiked } }";
export const feedBody = (posts: readonly bigint[]) => JSON.stringify({ query: feedQuery, variables: { ids: posts.map(String) } });
const likeMutation = "mutation($id: ID!) { likePost(postId: $id) { changed post { id counts { likes } viewerHasLiked } } }";
export const likeBody = (post: bigint) => JSON.stringify({ query: likeMutation, variables: { id: String(post) } });

/**
 * Pairs of a user who has liked nothing and a post, each handed out once per
 * bench run: every like of the like scenarios is a first like. Collects and
 * follows draw from the same idle users in turns of their own: the data set
 * holds no collect or follow.
 */
export class FreshPairs {
  private readonly nextHot: Record<Relation, number> = { like: 0, collect: 0, follow: 0 };
  private nextSpread = 0;

  constructor(private readonly data: Dataset) {}

  /** How many users have not liked the hot post yet. */
  get hotLeft(): number {
    return this.hotLeftOf("like");
  }

  hotLeftOf(relation: Relation): number {
    return this.data.idleIds.length - this.nextHot[relation];
  }

  /** A user who has not liked post 1 (which every liker of the data set likes). */
  hotLiker(): bigint {
    return this.hotMember("like");
  }

  /** A user who has not joined the hot target of the relation (post 1, or user 1 for follows). */
  hotMember(relation: Relation): bigint {
    const user = this.data.idleIds[this.nextHot[relation]++];
    if (user === undefined) throw new Error(`every idle user has joined the hot target's ${relation}s; run fewer hot rounds`);
    return user;
  }

  /** A user and a post other than post 1 they have not liked, spread over users and posts. */
  spreadPair(): Pair {
    const n = this.nextSpread++;
    const users = this.data.idleIds.length;
    const others = this.data.postIds.length - 1;
    const u = n % users;
    const round = Math.floor(n / users);
    if (round >= others) throw new Error("every (idle user, post) pair has been liked");
    // The same user comes back only after every other idle user, each time to another post.
    return { user: this.data.idleIds[u] as bigint, target: this.data.postIds[1 + ((u * 7_919 + round) % others)] as bigint };
  }
}

/**
 * Load of the same kind, unmeasured, before each scenario: the service's processes
 * compile and optimise their code, open connections and cache post rows on first
 * use, as they would long before production traffic peaks. Like scenarios warm up
 * with spread likes, so the hot post's fresh users are kept for the measurement.
 */
export async function warmUp(ctx: ScenarioContext, request: (n: number) => Request): Promise<void> {
  await runLoad({ scenario: "warm-up", mode: ctx.mode, service: ctx.service, redis: ctx.redis, durationSeconds: ctx.warmUpSeconds, request });
}

export function spreadLike(ctx: ScenarioContext): Request {
  const like = ctx.fresh.spreadPair();
  return { body: likeBody(like.target), token: ctx.token(like.user), change: like };
}
