// scale: feed100 and like-hot with one and two API processes (WEB_CONCURRENCY),
// against the bench's single Redis and against a 3-master Redis Cluster holding
// the same data, and the ratios of the runs: two processes to one, the cluster
// to the single Redis.
import { setTimeout as sleep } from "node:timers/promises";
import { startService, type RunningService, type ServiceMode } from "./harness.js";
import type { BenchRedis } from "./private-redis.js";
import type { HttpFigures } from "./http-load.js";
import { likeHot } from "./membership-scenarios.js";
import { feed100 } from "./read-scenarios.js";
import type { ScenarioContext } from "./scenario-context.js";

export const apiProcessCounts = [1, 2] as const;
export const scaleScenarios = ["feed100", "like-hot"] as const;
/** Runs of the service: each process count against the single Redis and against the cluster. */
export const scaleRunCount = apiProcessCounts.length * 2;
type ScaleScenario = (typeof scaleScenarios)[number];

/** Two API processes must serve at least this many times what one does. */
export const processTarget = 1.6;
/** like-hot on the cluster must reach at least this share of its rate on the single Redis, exact. */
export const clusterTarget = 0.7;

export interface ScaleRun {
  /** The Redis's label: "single" or "cluster". */
  readonly redis: string;
  readonly apiProcesses: number;
  readonly figures: HttpFigures;
}

export interface ScaleOptions {
  readonly redises: readonly BenchRedis[];
  readonly mode: ServiceMode;
  /** What every run of the service is started with besides its Redis and WEB_CONCURRENCY (DATABASE_URL, AMQP_URL). */
  readonly env: Readonly<Record<string, string>>;
  readonly profileDir?: string;
  /** The scenario context without what each run sets (its Redis, service and label). */
  readonly context: Omit<ScenarioContext, "redis" | "service" | "mode">;
}

/** Waits until the service runs `apiProcesses` API processes beside its supervisor: the first to answer may be alone for a moment. */
async function allProcessesUp(service: RunningService, apiProcesses: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  // service.cpu() counts the supervisor among the API processes (it is not the pipeline).
  while (service.cpu().apiProcesses < apiProcesses + 1) {
    if (Date.now() > deadline)
      throw new Error(`the service runs ${service.cpu().apiProcesses - 1} API processes 30 s after it answered, expected ${apiProcesses}`);
    await sleep(100);
  }
}

export async function scale(options: ScaleOptions): Promise<ScaleRun[]> {
  const { redises, mode, context } = options;
  const runs = redises.flatMap((redis) => apiProcessCounts.map((apiProcesses) => ({ redis, apiProcesses })));
  // Each run may use its share of the users who have not liked the hot post yet, and 20,000 at most.
  const hotLikes = Math.min(20_000, Math.floor(context.fresh.hotLeft / runs.length));
  const results: ScaleRun[] = [];
  for (const { redis, apiProcesses } of runs) {
    // A REDIS_CLUSTER_NODES in the bench's own environment must not turn the single runs into cluster runs.
    const env = { ...options.env, REDIS_CLUSTER_NODES: "", ...redis.env, WEB_CONCURRENCY: String(apiProcesses) };
    const service = await startService(mode, env, { profileDir: options.profileDir });
    try {
      await allProcessesUp(service, apiProcesses);
      const ctx: ScenarioContext = { ...context, redis, service, mode: `${mode}, ${redis.label}, ${apiProcesses} API` };
      for (const scenario of scaleScenarios) {
        console.error(`scale: ${scenario} (${ctx.mode}) ...`);
        const figures = scenario === "feed100" ? await feed100(ctx) : await likeHot(ctx, hotLikes);
        results.push({ redis: redis.label, apiProcesses, figures });
      }
    } finally {
      await service.stop();
    }
  }
  return results;
}

export interface ScaleRatio {
  readonly scenario: ScaleScenario;
  /** What is divided by what, e.g. "2 / 1 API processes, single". */
  readonly compared: string;
  readonly ratio: number;
  readonly target: number;
  /** Whether the issue sets this target for this scenario (the cluster's is like-hot's alone). */
  readonly targeted: boolean;
  /** Both runs were exact (feeds change nothing, so always). */
  readonly exact: boolean;
  /** The ratio reaches the target and both runs were exact. */
  readonly met: boolean;
}

const isExact = (figures: HttpFigures) => figures.exact === "n/a" || figures.exact.startsWith("yes");

/** Two processes over one for each scenario and Redis; the cluster over the single Redis for each scenario and process count. */
export function scaleRatios(runs: readonly ScaleRun[]): ScaleRatio[] {
  const find = (scenario: ScaleScenario, redis: string, apiProcesses: number) =>
    runs.find((r) => r.figures.scenario === scenario && r.redis === redis && r.apiProcesses === apiProcesses)?.figures;
  const ratios: ScaleRatio[] = [];
  const add = (scenario: ScaleScenario, compared: string, over: HttpFigures | undefined, under: HttpFigures | undefined, target: number, targeted: boolean) => {
    if (!over || !under) return;
    const ratio = over.requestsPerSecond / Math.max(1, under.requestsPerSecond);
    const exact = isExact(over) && isExact(under);
    ratios.push({ scenario, compared, ratio, target, targeted, exact, met: ratio >= target && exact });
  };
  const redises = [...new Set(runs.map((r) => r.redis))];
  for (const scenario of scaleScenarios) {
    for (const redis of redises) add(scenario, `2 / 1 API processes, ${redis}`, find(scenario, redis, 2), find(scenario, redis, 1), processTarget, true);
    for (const apiProcesses of apiProcessCounts) {
      add(
        scenario,
        `cluster / single, ${apiProcesses} API`,
        find(scenario, "cluster", apiProcesses),
        find(scenario, "single", apiProcesses),
        clusterTarget,
        scenario === "like-hot",
      );
    }
  }
  return ratios;
}
