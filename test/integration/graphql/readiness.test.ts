// Readiness of an API process as its entry point wires it: PostgreSQL and Redis
// must answer; RabbitMQ is watched, and its absence makes the process degraded, not unready.
import { createServer } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { compose, readinessShareMs } from "../../../src/compose.js";
import type { ReadinessReport } from "../../../src/graphql/readiness.js";
import { openClients, type Clients } from "../../../src/stores/clients.js";
import { openRedis, silentLogger, testConfig } from "../../support/env.js";

const opened: Clients[] = [];
afterEach(async () => {
  for (const clients of opened.splice(0)) await clients.close();
});

async function apiReadiness(overrides: Record<string, string> = {}) {
  // Other files leave changes in the suite's outbox with no relay running: a backlog is not what these tests look at.
  const config = testConfig({ OUTBOX_WARN_LENGTH: "100000000", ...overrides });
  const clients = await openClients(config, silentLogger, { watchRabbit: true });
  opened.push(clients);
  return compose(config, clients, silentLogger).readiness;
}

/**
 * Asks until `done` holds (a connection is made in the background, and RabbitMQ may still be
 * starting after a file that restarted it), returning the last report.
 */
async function readinessUntil(readiness: () => Promise<ReadinessReport>, done: (report: ReadinessReport) => boolean): Promise<ReadinessReport> {
  let report = await readiness();
  for (let i = 0; i < 200 && !done(report); i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    report = await readiness();
  }
  return report;
}

/** A port nothing listens on: a RabbitMQ that is down. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== "object" || !address) throw new Error("no port");
  return address.port;
}

describe("readiness of an API process", () => {
  it("when probes hammer readiness, then the stores see one check a second per process, not one per probe", async () => {
    const readiness = await apiReadiness();
    await readinessUntil(readiness, (report) => report.ready);
    const redis = await openRedis();
    try {
      const commands = async () => {
        let all = 0;
        for (const match of (await redis.info("commandstats")).matchAll(/^cmdstat_[^:]+:calls=(\d+)/gm)) all += Number(match[1]);
        return all;
      };
      await new Promise((resolve) => setTimeout(resolve, readinessShareMs));
      const before = await commands();
      for (let round = 0; round < 10; round++) {
        const reports = await Promise.all(Array.from({ length: 50 }, () => readiness()));
        expect(reports.every((r) => r.ready)).toBe(true);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      // 500 probes over about half a second: at most one check (a PING, the outbox's length once per
      // node) and the two INFO around them.
      expect((await commands()) - before).toBeLessThanOrEqual(5);
    } finally {
      await redis.quit();
    }
  });

  it("when RabbitMQ answers, then the process is ready and reports RabbitMQ ok", async () => {
    const readiness = await apiReadiness();
    const report = await readinessUntil(readiness, (r) => r.checks.rabbitmq === "ok");
    expect(report).toMatchObject({ ready: true, degraded: false, checks: { postgres: "ok", redis: "ok", rabbitmq: "ok" } });
  });

  it("when RabbitMQ is down, then the process still serves but reports itself degraded, naming RabbitMQ", async () => {
    const readiness = await apiReadiness({ AMQP_URL: `amqp://guest:guest@127.0.0.1:${await closedPort()}` });
    const report = await readiness();
    expect(report.ready).toBe(true);
    expect(report.degraded).toBe(true);
    expect(report.checks.rabbitmq).toMatch(/RabbitMQ is not connected/);
    expect(report.checks.postgres).toBe("ok");
  });
});
