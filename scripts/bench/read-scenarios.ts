// The scenarios that read counts: feeds of posts by id, the hot ranking, and how
// soon a like shows in counts read through the service.
import { request as httpRequest } from "node:http";
import { round, runLoad, type HttpFigures } from "./http-load.js";
import { feedBody, likeBody, random, sample, warmUp, type ScenarioContext } from "./scenario-context.js";

/** posts(ids) of 100 random distinct posts, new ids every request, for a random viewer who likes things. */
export async function feed100(ctx: ScenarioContext): Promise<HttpFigures> {
  const request = () => ({ body: feedBody(sample(ctx.data.postIds, 100)), token: ctx.token(random(ctx.data.likerIds)) });
  await warmUp(ctx, request);
  return {
    ...(await runLoad({ scenario: "feed100", mode: ctx.mode, service: ctx.service, redis: ctx.redis, durationSeconds: ctx.durationSeconds, request })),
    exact: "n/a",
  };
}

const hotPostsBody = JSON.stringify({ query: "{ hotPosts(first: 100, window: DAY) { id title counts { likes reads comments collects } } }" });

/**
 * hotPosts(first: 100, window: DAY) with every count, anonymous: the ranking's ids
 * from Redis, the posts from the catalog, their counts read live per request.
 */
export async function hotPosts(ctx: ScenarioContext): Promise<HttpFigures> {
  const request = () => ({ body: hotPostsBody, token: "" });
  await warmUp(ctx, request);
  let full = 0;
  let answered = 0;
  const figures = await runLoad({
    scenario: "hot-posts",
    mode: ctx.mode,
    service: ctx.service,
    redis: ctx.redis,
    durationSeconds: ctx.durationSeconds,
    request,
    onAnswered: (body) => {
      answered++;
      if (body.split('"counts"').length - 1 === 100) full++;
    },
  });
  return { ...figures, exact: full === answered ? "n/a (100 posts every answer)" : `NO: ${answered - full} of ${answered} answers without 100 posts` };
}

/** A POST to the service on a connection of its own, so that any API process may answer it. */
function postAlone(url: string, body: string, token = ""): Promise<string> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, {
      method: "POST",
      agent: false,
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    });
    request.on("response", (response) => {
      let text = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => (text += chunk));
      response.on("end", () => resolve(text));
      response.on("error", reject);
    });
    request.on("error", reject);
    request.end(body);
  });
}

export interface LagFigures {
  readonly mode: string;
  readonly likes: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Reads answered with the count from before the like, after its answer. */
  readonly staleReads: number;
}

/**
 * How soon a like shows in counts read through the service: a post is read until
 * every API process holds its counts, a new user likes it, and it is read again,
 * each read on a connection of its own (so any process answers), until a read
 * shows the like. The lag is from the like's answer to the start of that read.
 */
export async function countsLag(ctx: ScenarioContext, likes = 200): Promise<LagFigures> {
  const read = (post: bigint) => JSON.stringify({ query: "query($id: ID!) { post(id: $id) { counts { likes } } }", variables: { id: String(post) } });
  const likesOf = (text: string) => Number(/"likes":(\d+)/.exec(text)?.[1] ?? Number.NaN);
  const lags: number[] = [];
  let staleReads = 0;
  for (let i = 0; i < likes; i++) {
    const { user, target } = ctx.fresh.spreadPair();
    let before = 0;
    for (let r = 0; r < 4; r++) before = likesOf(await postAlone(ctx.service.url, read(target)));
    const answer = await postAlone(ctx.service.url, likeBody(target), ctx.token(user));
    const answeredAt = performance.now();
    if (!answer.includes('"changed":true')) continue;
    for (;;) {
      const startedMs = performance.now() - answeredAt;
      if (likesOf(await postAlone(ctx.service.url, read(target))) > before) {
        lags.push(startedMs);
        break;
      }
      staleReads++;
      if (startedMs > 5_000) throw new Error(`post ${target} did not show a like 5 s after it was answered`);
    }
  }
  lags.sort((a, b) => a - b);
  const at = (q: number) => round(lags[Math.min(lags.length - 1, Math.floor(q * lags.length))] ?? 0, 2);
  return { mode: ctx.mode, likes: lags.length, p50Ms: at(0.5), p99Ms: at(0.99), maxMs: round(lags.at(-1) ?? 0, 2), staleReads };
}
