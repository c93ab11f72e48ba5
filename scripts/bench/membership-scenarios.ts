// The scenarios that change memberships (likes, collects, follows): of the hot
// target, spread over posts, and mixed with feeds; each checked for exactness.
import type { Relation } from "../../src/domain/model/index.js";
import { countedChanges, members, pairKey } from "./counted-changes.js";
import type { HttpFigures, Pair } from "./http-load.js";
import { feedBody, likeBody, random, sample, spreadLike, warmUp, type ScenarioContext } from "./scenario-context.js";

const collectMutation = "mutation($id: ID!) { collectPost(postId: $id) { changed post { id counts { collects } viewerHasCollected } } }";
const followMutation = "mutation($id: ID!) { followUser(userId: $id) { changed user { id counts { followers } viewerFollows } } }";

const none = async (pairs: readonly Pair[]) => pairs.map(() => false);

/** Users who have liked nothing like post 1, the hottest post, each once: `likes` of them (as many as the duration would take, about). */
export async function likeHot(ctx: ScenarioContext, likes: number): Promise<HttpFigures> {
  return hot(ctx, "like", likes);
}

/** The same with collects of post 1. */
export async function collectHot(ctx: ScenarioContext, collects: number): Promise<HttpFigures> {
  return hot(ctx, "collect", collects);
}

/** The same with follows of user 1 (a user of the data set who likes things). */
export async function followHot(ctx: ScenarioContext, follows: number): Promise<HttpFigures> {
  return hot(ctx, "follow", follows);
}

const hotBodies: Record<Relation, (target: bigint) => string> = {
  like: likeBody,
  collect: (target) => JSON.stringify({ query: collectMutation, variables: { id: String(target) } }),
  follow: (target) => JSON.stringify({ query: followMutation, variables: { id: String(target) } }),
};

async function hot(ctx: ScenarioContext, relation: Relation, changes: number): Promise<HttpFigures> {
  await warmUp(ctx, () => spreadLike(ctx));
  const target = relation === "follow" ? (ctx.data.likerIds[0] as bigint) : (ctx.data.postIds[0] as bigint);
  const body = hotBodies[relation](target);
  return countedChanges(
    ctx,
    relation,
    [target],
    {
      scenario: `${relation}-hot`,
      durationSeconds: ctx.durationSeconds,
      amount: Math.min(changes, ctx.fresh.hotLeftOf(relation)),
      request: () => {
        const user = ctx.fresh.hotMember(relation);
        return { body, token: ctx.token(user), change: { user, target } };
      },
    },
    none,
  );
}

/** Users who have liked nothing like random posts, each (user, post) pair once. */
export async function likeSpread(ctx: ScenarioContext): Promise<HttpFigures> {
  await warmUp(ctx, () => spreadLike(ctx));
  return countedChanges(ctx, "like", ctx.data.postIds, { scenario: "like-spread", durationSeconds: ctx.durationSeconds, request: () => spreadLike(ctx) }, none);
}

/**
 * 90% feeds of 20 random posts, 10% likes of a random post, all by random
 * viewers who like things (so some likes find the post already liked). The
 * likes are drawn before the run, so which were held before is known.
 */
export async function mixed(ctx: ScenarioContext): Promise<HttpFigures> {
  const likes: Pair[] = Array.from({ length: 5_000 * ctx.durationSeconds }, () => ({ user: random(ctx.data.likerIds), target: random(ctx.data.postIds) }));
  const heldAtStart = new Map((await members(ctx.redis.client, "like", likes)).map((held, i) => [pairKey(likes[i] as Pair), held]));
  let nextLike = 0;
  const feed20 = () => ({ body: feedBody(sample(ctx.data.postIds, 20)), token: ctx.token(random(ctx.data.likerIds)) });
  await warmUp(ctx, () => (Math.random() < 0.1 ? spreadLike(ctx) : feed20()));
  return countedChanges(
    ctx,
    "like",
    ctx.data.postIds,
    {
      scenario: "mixed",
      durationSeconds: ctx.durationSeconds,
      request: () => {
        if (Math.random() < 0.1) {
          const like = likes[nextLike++ % likes.length] as Pair;
          return { body: likeBody(like.target), token: ctx.token(like.user), change: like };
        }
        return feed20();
      },
    },
    async (pairs) => pairs.map((pair) => heldAtStart.get(pairKey(pair)) === true),
  );
}
