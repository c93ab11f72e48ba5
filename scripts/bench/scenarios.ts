// The HTTP scenarios of `npm run bench` by name, run against the service on the
// realistic data set; raw-redis.ts measures the Redis figures they are compared with.
import type { HttpFigures } from "./http-load.js";
import { collectHot, followHot, likeHot, likeSpread, mixed } from "./membership-scenarios.js";
import { countsLag, feed100, hotPosts, type LagFigures } from "./read-scenarios.js";
import type { ScenarioContext } from "./scenario-context.js";
import { viewsHot, type ViewsFigures } from "./view-scenarios.js";

export const httpScenarios = [
  "feed100",
  "like-hot",
  "like-spread",
  "mixed",
  "collect-hot",
  "follow-hot",
  "views-hot",
  "views-hot-batched",
  "hot-posts",
] as const;
export type HttpScenario = (typeof httpScenarios)[number];

/** What the HTTP scenarios measured, in the order they ran. */
export interface HttpResults {
  readonly http: HttpFigures[];
  readonly views: ViewsFigures[];
  readonly lags: LagFigures[];
}

/** Runs one scenario against the context's service and adds its figures to `results`; `hotLikes` caps the hot scenarios' changes. */
export async function runHttpScenario(ctx: ScenarioContext, scenario: HttpScenario, hotLikes: number, results: HttpResults): Promise<void> {
  console.error(`${scenario} (${ctx.mode}) ...`);
  if (scenario === "views-hot" || scenario === "views-hot-batched") {
    // A feed page's views (the hot post among 20), or a client's buffered reports of the hot post.
    const views = scenario === "views-hot" ? await viewsHot(ctx, 20, 1) : await viewsHot(ctx, 100, 100);
    results.views.push(views);
    results.http.push(views.http);
    return;
  }
  if (scenario === "feed100") {
    results.http.push(await feed100(ctx));
    console.error(`counts lag (${ctx.mode}): likes read back through the service ...`);
    results.lags.push(await countsLag(ctx));
    return;
  }
  const figures =
    scenario === "like-hot"
      ? await likeHot(ctx, hotLikes)
      : scenario === "collect-hot"
        ? await collectHot(ctx, hotLikes)
        : scenario === "follow-hot"
          ? await followHot(ctx, hotLikes)
          : scenario === "like-spread"
            ? await likeSpread(ctx)
            : scenario === "hot-posts"
              ? await hotPosts(ctx)
              : await mixed(ctx);
  results.http.push(figures);
}
