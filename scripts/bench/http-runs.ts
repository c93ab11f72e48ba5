// The HTTP scenarios and live-hot against each mode of the service: this checkout's,
// then `--against`'s, so the two are compared on the same data in one run.
import path from "node:path";
import { createTokenService } from "../../src/graphql/tokens.js";
import type { Dataset } from "./dataset.js";
import { benchSecret, startService } from "./harness.js";
import { liveHot, type LiveFigures } from "./live.js";
import type { BenchOptions } from "./options.js";
import type { PrivateRedis } from "./private-redis.js";
import { scaleRunCount } from "./scale.js";
import type { FreshPairs, ScenarioContext } from "./scenario-context.js";
import { httpScenarios, runHttpScenario, type HttpResults } from "./scenarios.js";

export async function issueTokens(ids: readonly bigint[]): Promise<Map<bigint, string>> {
  const tokens = createTokenService({ secret: benchSecret, ttlSeconds: 6 * 3600 });
  const byUser = new Map<bigint, string>();
  for (let i = 0; i < ids.length; i += 2_000) {
    const chunk = ids.slice(i, i + 2_000);
    (await Promise.all(chunk.map((id) => tokens.issue(id)))).forEach((token, j) => byUser.set(chunk[j] as bigint, token));
  }
  return byUser;
}

export interface HttpRunsSetup {
  readonly options: BenchOptions;
  readonly data: Dataset;
  readonly redis: PrivateRedis;
  readonly databaseUrl: string;
  readonly amqp: string;
  /** Bearer tokens by user id. */
  readonly token: (userId: bigint) => string;
  readonly fresh: FreshPairs;
}

export interface HttpRunsResults extends HttpResults {
  readonly live: LiveFigures[];
}

/** Each mode, this checkout's service then `--against`'s. */
function serviceRuns(options: BenchOptions) {
  const services =
    options.against === undefined
      ? [{ label: "", directory: undefined }]
      : [
          { label: "", directory: undefined },
          { label: ` @ ${path.basename(path.resolve(options.against))}`, directory: path.resolve(options.against) },
        ];
  return options.modes.flatMap((mode) => services.map((s) => ({ mode, ...s })));
}

export async function runHttpServices(setup: HttpRunsSetup): Promise<HttpRunsResults> {
  const { options, data, redis } = setup;
  const results: HttpRunsResults = { http: [], views: [], lags: [], live: [] };
  const runs = serviceRuns(options);
  // Each run may use its share of the users who have not liked the hot post (scale's runs included), and 20,000 at most.
  const hotLikes = Math.min(20_000, Math.floor(data.idleIds.length / (runs.length + (options.chosen.has("scale") ? scaleRunCount : 0))));
  for (const { mode, label, directory } of runs) {
    // The other checkout gets queues of its own: its messages need not be readable by this one's consumers.
    const env = {
      DATABASE_URL: setup.databaseUrl,
      REDIS_URL: redis.url,
      AMQP_URL: setup.amqp,
      ...(directory ? { RABBITMQ_PREFIX: "likes_bench_other" } : Object.fromEntries(options.settings)),
    };
    const service = await startService(mode, env, { profileDir: options.profileDir, directory });
    try {
      const { durationSeconds, warmUpSeconds } = options;
      const ctx: ScenarioContext = { data, redis, service, mode: `${mode}${label}`, durationSeconds, warmUpSeconds, token: setup.token, fresh: setup.fresh };
      await runScenarios(ctx, options.chosen, hotLikes, results);
    } finally {
      await service.stop();
    }
  }
  return results;
}

async function runScenarios(ctx: ScenarioContext, chosen: BenchOptions["chosen"], hotLikes: number, results: HttpRunsResults): Promise<void> {
  for (const scenario of httpScenarios) {
    if (chosen.has(scenario)) await runHttpScenario(ctx, scenario, hotLikes, results);
  }
  if (chosen.has("live-hot")) {
    console.error(`live-hot (${ctx.mode}): 1,000 subscribers, 2,000 likes/s ...`);
    results.live.push(await liveHot(ctx, { subscribers: 1_000, likesPerSecond: 2_000, seconds: ctx.durationSeconds }));
  }
}
