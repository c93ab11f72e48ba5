// Every metric the Grafana dashboard and the Prometheus alert rules of deploy/ name is one
// the service serves: read from the /metrics of an API process and of a worker, each run
// alone as Kubernetes runs them (src/main/api.ts and worker.ts, which the image runs compiled).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../../scripts/lib/ports.js";
import type { Config } from "../../../src/config.js";
import { createUsers, emptyRedis, graphqlClient, openDatabase, openRedis, testConfig } from "../../support/env.js";
import { eventually } from "../../support/pipeline.js";
import { startApiProcess, startWorkerProcess, type ServiceProcess } from "../../support/service-process.js";
import { deployedQueries, isServed, metricFamilies, metricNamesIn } from "../../support/observability.js";

interface Running {
  readonly process: ServiceProcess;
  readonly metricsPort: number;
}

/** Runs an entry point alone with its metrics on a port of its own; resolves once it serves them. */
async function run(start: typeof startApiProcess, config: Config): Promise<Running> {
  const metricsPort = await freePort();
  const process = await start(config, { METRICS_PORT: String(metricsPort), RECONCILE_CRON: "off" });
  const running = { process, metricsPort };
  await eventually(
    async () => (await scrape(running)).includes("# TYPE likes_"),
    30_000,
    () => `the process serves no metrics:\n${process.output()}`,
  );
  return running;
}

const scrape = async (running: Running) => (await fetch(`http://127.0.0.1:${running.metricsPort}/metrics`)).text();

describe("the metrics of the dashboard and the alert rules", () => {
  let api: Running | undefined;
  let worker: Running | undefined;
  const config = testConfig();
  const db = openDatabase(config);
  beforeAll(async () => {
    // An outbox earlier files left would be persisted first: "before anything happened" starts from an empty Redis.
    const redis = await openRedis();
    await emptyRedis(redis);
    await redis.quit();
    [api, worker] = await Promise.all([run(startApiProcess, config), run(startWorkerProcess, config)]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([api?.process.stop("SIGTERM"), worker?.process.stop("SIGTERM")]);
    await db.$disconnect();
  });

  it("when an API process and a worker are scraped, then every metric a panel or a rule names is served by one of them", async () => {
    if (!api || !worker) throw new Error("the processes did not start");
    const [apiFamilies, workerFamilies] = [metricFamilies(await scrape(api)), metricFamilies(await scrape(worker))];
    expect(apiFamilies.has("likes_graphql_request_duration_seconds")).toBe(true);
    expect(workerFamilies.has("likes_outbox_length")).toBe(true);
    const missing = deployedQueries().flatMap(({ where, expr }) =>
      metricNamesIn(expr)
        .filter((name) => !isServed(name, apiFamilies) && !isServed(name, workerFamilies))
        .map((name) => `${where}: ${name}`),
    );
    expect(missing).toEqual([]);
  });

  it("when the processes are scraped, then the labelled counters the alerts watch show their series at 0 before anything happened", async () => {
    if (!api || !worker) throw new Error("the processes did not start");
    const [apiText, workerText] = [await scrape(api), await scrape(worker)];
    expect(apiText).toMatch(/^likes_readiness_checks_failed_total\{check="redis",effect="degraded"\} 0$/m);
    expect(apiText).toMatch(/^likes_readiness_checks_failed_total\{check="postgres",effect="unavailable"\} 0$/m);
    expect(apiText).toMatch(/^likes_redis_reachable 1$/m);
    expect(apiText).toMatch(/^likes_warmer_failed_batches_total 0$/m);
    expect(workerText).toMatch(/^likes_reconcile_differences_total\{kind="missingInDatabase"\} 0$/m);
    expect(workerText).toMatch(/^likes_reconcile_passes_total\{outcome="failed"\} 0$/m);
    expect(workerText).toMatch(/^likes_changes_persisted_total\{relation="like",action="add"\} 0$/m);
    // Read from Redis at the scrape: the test's Redis answers, so the reading is its own, not the gauge's initial 0.
    expect(Number(/^likes_redis_memory_used_bytes (\S+)$/m.exec(workerText)?.[1])).toBeGreaterThan(0);
  });

  it("when a user likes a post, then the worker records the like, its relay and persist lags and its batch", async () => {
    if (!api || !worker) throw new Error("the processes did not start");
    const { url } = api.process;
    const [user] = await createUsers(db, config, 1);
    if (!user) throw new Error("no user made");
    const gql = graphqlClient(url);
    const created = await gql<{ createPost: { id: string } }>(`mutation { createPost(title: "t", body: "b") { id } }`, {}, user.token);
    const postId = created.data?.createPost.id;
    if (!postId) throw new Error(`no post made: ${JSON.stringify(created)}`);
    const liked = await gql<{ likePost: { changed: boolean } }>(`mutation($id: ID!) { likePost(postId: $id) { changed } }`, { id: postId }, user.token);
    expect(liked.data?.likePost.changed).toBe(true);

    const value = (text: string, series: string) =>
      Number(
        text
          .split("\n")
          .find((line) => line.startsWith(`${series} `))
          ?.split(" ")[1] ?? Number.NaN,
      );
    // At least: the suite's Redis may still hold changes an earlier file left in its outbox, which this worker relays too.
    await eventually(
      async () => value(await scrape(worker as Running), 'likes_changes_persisted_total{relation="like",action="add"}') >= 1,
      15_000,
      async () => scrape(worker as Running),
    );
    const text = await scrape(worker);
    const persisted = value(text, "likes_events_persisted_total");
    expect(value(text, "likes_relay_lag_seconds_count")).toBeGreaterThanOrEqual(1);
    expect(value(text, "likes_persist_lag_seconds_count")).toBe(persisted);
    expect(value(text, "likes_persist_batch_changes_sum")).toBe(persisted);
    expect(value(text, "likes_persist_batch_changes_count")).toBe(value(text, "likes_persist_batches_total"));
  });
});
