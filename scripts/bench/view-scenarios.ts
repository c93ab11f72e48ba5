// The scenarios that report views of the hot post, a feed page's or a client's buffered batch.
import { setTimeout as sleep } from "node:timers/promises";
import { createRedisKeys } from "../../src/stores/redis/keys.js";
import { partitions } from "./harness.js";
import { runLoad, type HttpFigures } from "./http-load.js";
import type { BenchRedis } from "./private-redis.js";
import { sample, warmUp, type ScenarioContext } from "./scenario-context.js";

const viewsMutation = "mutation($ids: [ID!]!) { recordViews(postIds: $ids) }";

/** Calls of Lua scripts Redis ran so far (EVALSHA and EVAL), from INFO commandstats of every server. */
async function scriptCalls(redis: BenchRedis): Promise<number> {
  const stats = (await redis.info("commandstats")).join("\n");
  return [...stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
}

export interface ViewsFigures {
  readonly http: HttpFigures;
  /** Views of the hot post counted per second. */
  readonly hotViewsPerSecond: number;
  /** Reports each request carried, and how many of them were of the hot post. */
  readonly perRequest: string;
  /** Script calls Redis ran per second of the load: the flushes of the views (views are anonymous, so no rate budget is charged). */
  readonly redisScriptsPerSecond: number;
}

/**
 * Anonymous clients report views, each request a batch that holds post 1, the
 * hottest post, `hotPerRequest` times among `perRequest` reports (the rest
 * random posts): a feed page's views (20 reports, the hot post once), or a
 * client that buffers what it displayed (100 reports of the hot post). The hot
 * post's 'read' counter must move by the views answered counted, and at most by
 * those sent too (requests in flight when the load stopped were counted
 * unanswered), once the last flush landed.
 */
export async function viewsHot(ctx: ScenarioContext, perRequest: number, hotPerRequest: number): Promise<ViewsFigures> {
  const hotPost = ctx.data.postIds[0] as bigint;
  const others = ctx.data.postIds.slice(1);
  const body = () => {
    const ids = [...Array.from({ length: hotPerRequest }, () => hotPost), ...sample(others, perRequest - hotPerRequest)];
    return JSON.stringify({ query: viewsMutation, variables: { ids: ids.map(String) } });
  };
  let sent = 0;
  const request = () => {
    sent++;
    return { body: body(), token: "" };
  };
  await warmUp(ctx, request);
  const read = async () => Number((await ctx.redis.client.hget(createRedisKeys(partitions).counters({ type: "post", id: hotPost }), "read")) ?? 0);
  // The warm-up's views are flushed within a second.
  await sleep(2_000);
  const before = await read();
  const scriptsBefore = await scriptCalls(ctx.redis);
  sent = 0;
  let answered = 0;
  const started = performance.now();
  const figures = await runLoad({
    scenario: hotPerRequest === perRequest ? "views-hot-batched" : "views-hot",
    mode: ctx.mode,
    service: ctx.service,
    redis: ctx.redis,
    durationSeconds: ctx.durationSeconds,
    request,
    onAnswered: (text) => {
      if (/"recordViews":\d+/.test(text)) answered++;
    },
  });
  const seconds = (performance.now() - started) / 1000;
  const scripts = (await scriptCalls(ctx.redis)) - scriptsBefore;
  await sleep(2_000);
  const moved = (await read()) - before;
  const [low, high] = [answered * hotPerRequest, sent * hotPerRequest];
  return {
    http: {
      ...figures,
      exact:
        moved >= low && moved <= high ? `yes (+${moved} views of the hot post, ${low} answered)` : `NO: read moved ${moved}, answered ${low}, sent ${high}`,
    },
    hotViewsPerSecond: Math.round(low / seconds),
    perRequest: hotPerRequest === perRequest ? `${perRequest} reports of the hot post` : `${perRequest} reports, ${hotPerRequest} of the hot post`,
    redisScriptsPerSecond: Number((scripts / seconds).toFixed(1)),
  };
}
