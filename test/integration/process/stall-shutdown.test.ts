// npm start stopped while Redis answers nothing: every process must still be gone
// within seconds and exit 0, and what the outbox holds must stay in Redis.
import { inject } from "vitest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createUsers, dataOf, graphqlClient, openDatabase, openRedis, privateRedisPort, privateRedisUrl, testConfig } from "../../support/env.js";
import { eventually } from "../../support/pipeline.js";
import { startServiceProcess, type ServiceProcess } from "../../support/service-process.js";
import { startTcpProxy, type TcpProxy } from "../../support/tcp-proxy.js";

let redisProxy: TcpProxy;
let rabbitProxy: TcpProxy;
let db: Database;
let redis: RedisClient;

beforeAll(async () => {
  redisProxy = await startTcpProxy({ host: "127.0.0.1", port: privateRedisPort() });
  const amqp = new URL(inject("amqpUrl"));
  rabbitProxy = await startTcpProxy({ host: amqp.hostname, port: Number(amqp.port || 5672) }, "amqp");
  db = openDatabase();
  redis = await openRedis({ url: privateRedisUrl() });
});
afterAll(async () => {
  redisProxy.resume();
  rabbitProxy.resume();
  await redisProxy.close();
  await rabbitProxy.close();
  await db.$disconnect();
  redis.disconnect();
});

/** Lines of the output with message `msg`, parsed. */
function logsOf(service: ServiceProcess, msg: string): Record<string, unknown>[] {
  return service
    .output()
    .split("\n")
    .filter((line) => line.includes(`"msg":"${msg}"`))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("npm start stopped during a Redis stall", () => {
  it("when Redis answers nothing and the service gets SIGTERM, then every process exits 0 within 10 s and the outbox stays in Redis", async () => {
    const config = testConfig({ REDIS_PARTITIONS: "8" });
    const amqp = new URL(config.amqpUrl);
    amqp.host = `127.0.0.1:${rabbitProxy.port}`;
    const service = await startServiceProcess(config, { REDIS_URL: redisProxy.url, AMQP_URL: amqp.toString(), WEB_CONCURRENCY: "2", REDIS_PARTITIONS: "8" });
    let stopped = false;
    try {
      await eventually(
        async () => logsOf(service, "API process ready").length >= 2 && logsOf(service, "pipeline running").length >= 1,
        30_000,
        () => service.output(),
      );
      const pids = [...logsOf(service, "API process ready"), ...logsOf(service, "pipeline running")].map((line) => Number(line.pid));

      // The broker unreachable: the likes wait in the outbox, some of them in the relay's hands.
      rabbitProxy.refuse();
      const outboxLength = async () => {
        const lengths = await Promise.all(
          createRedisKeys(8)
            .outboxes()
            .map((key) => redis.xlen(key)),
        );
        return lengths.reduce((sum, n) => sum + n, 0);
      };
      // Streams other files left in the shared test Redis are counted too: only what this test adds matters.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const before = await outboxLength();
      const [user] = await createUsers(db, config, 1);
      if (!user) throw new Error("no user made");
      const gql = graphqlClient(service.url);
      const likes = 20;
      for (let i = 0; i < likes; i++) {
        const { createPost } = dataOf(await gql<{ createPost: { id: string } }>(`mutation { createPost(title: "t", body: "b") { id } }`, {}, user.token));
        dataOf(await gql(`mutation($id: ID!) { likePost(postId: $id) { changed } }`, { id: createPost.id }, user.token));
      }
      expect(await outboxLength()).toBeGreaterThanOrEqual(before + likes);

      redisProxy.hold();
      // Let every process find itself waiting on Redis: a relay read, readiness, live counts' listeners.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const startedAt = Date.now();
      const code = await service.stop("SIGTERM");
      stopped = true;
      const tookMs = Date.now() - startedAt;

      expect({ code, tookMs: tookMs <= 10_000 ? "≤ 10 s" : `${tookMs} ms` }).toEqual({ code: 0, tookMs: "≤ 10 s" });
      expect(pids.filter(alive)).toEqual([]);
      const children = logsOf(service, "process stopped").map((line) => ({ role: line.role, code: line.code }));
      expect(children).toEqual(
        expect.arrayContaining([
          { role: "api", code: 0 },
          { role: "api", code: 0 },
          { role: "pipeline", code: 0 },
        ]),
      );
      expect(children).toHaveLength(3);
      // Read past the proxy: what the stalled service could not hand to RabbitMQ is still there.
      expect(await outboxLength()).toBeGreaterThanOrEqual(before + likes);
    } finally {
      redisProxy.resume();
      rabbitProxy.resume();
      if (!stopped) await service.stop("SIGKILL");
    }
  });
});
