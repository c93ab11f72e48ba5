// METRICS_PORT under npm start's process layout: the supervisor serves the sum of
// every process's metrics; the pipeline run alone serves its own.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { freePort } from "../../../scripts/lib/ports.js";
import { graphqlClient, testConfig } from "../../support/env.js";
import { eventually } from "../../support/pipeline.js";
import { entryPoint, startServiceProcess } from "../../support/service-process.js";

const scrape = async (port: number) => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
const valueOf = (text: string, series: string) => Number(new RegExp(`^${series.replace(/[{}"]/g, "\\$&")} (\\S+)$`, "m").exec(text)?.[1] ?? Number.NaN);

describe("metrics of npm start's processes", () => {
  it("when two API processes answered operations, then METRICS_PORT serves their counts summed, beside the pipeline's metrics", async () => {
    const metricsPort = await freePort();
    const service = await startServiceProcess(testConfig(), { WEB_CONCURRENCY: "2", METRICS_PORT: String(metricsPort) });
    try {
      const ready = () => (service.output().match(/"msg":"API process ready"/g) ?? []).length >= 2 && service.output().includes('"msg":"pipeline running"');
      await eventually(
        async () => ready(),
        30_000,
        () => service.output(),
      );
      const gql = graphqlClient(service.url);
      // Each over a connection of its own, so that both API processes take some.
      await Promise.all(Array.from({ length: 20 }, () => gql("query Probe { __typename }")));
      const series = 'likes_graphql_request_duration_seconds_count{operation="Probe",type="query"}';
      await eventually(
        async () => valueOf(await scrape(metricsPort), series) === 20,
        15_000,
        () => scrape(metricsPort),
      );
      const text = await scrape(metricsPort);
      expect(text).toContain("# TYPE likes_outbox_length gauge");
      expect(text).toContain("# TYPE likes_redis_command_duration_seconds histogram");
      // The private Redis keeps no AOF: three processes found it, one of them says so.
      expect(service.output().match(/Redis runs without AOF and without replicas/g)).toHaveLength(1);
    } finally {
      expect(await service.stop("SIGTERM")).toBe(0);
    }
  });

  it("when the pipeline runs alone (npm run worker), then it serves its own metrics on METRICS_PORT", async () => {
    const config = testConfig();
    const metricsPort = await freePort();
    const child = spawn(process.execPath, [entryPoint("worker")], {
      env: {
        ...process.env,
        DATABASE_URL: config.databaseUrl,
        REDIS_URL: config.redisUrl,
        AMQP_URL: config.amqpUrl,
        RABBITMQ_PREFIX: config.rabbitmq.prefix,
        RABBITMQ_QUEUE_TYPE: config.rabbitmq.queueType,
        METRICS_PORT: String(metricsPort),
        LOG_LEVEL: "warn",
        RECONCILE_CRON: "off",
      },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let errors = "";
    child.stderr?.on("data", (chunk: Buffer) => (errors += chunk.toString()));
    try {
      await eventually(
        async () => (await scrape(metricsPort)).includes("# TYPE likes_outbox_length gauge"),
        30_000,
        () => errors,
      );
    } finally {
      child.kill("SIGTERM");
      await once(child, "exit");
    }
  });
});
