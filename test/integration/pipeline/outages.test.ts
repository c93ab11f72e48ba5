// Nothing acknowledged is lost across a RabbitMQ outage, a PostgreSQL restart or a
// kill -9 of the service. The machine's RabbitMQ and PostgreSQL are shared: their
// outages are a TCP proxy between the pipeline and them refusing connections
// (every open one reset, every new one reset at once), never a stopped server.
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, inject, it } from "vitest";
import type { Config } from "../../../src/config.js";
import type { LikeableTarget } from "../../../src/domain/model/index.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { createUsers, graphqlClient, testConfig, type TestUser } from "../../support/env.js";
import { eventually, startTestPipeline, type TestPipeline } from "../../support/pipeline.js";
import { startServiceProcess } from "../../support/service-process.js";
import { agreeWithin, createPosts, servicesOn, useStores } from "../../support/stores.js";
import { startTcpProxy, type TcpProxy } from "../../support/tcp-proxy.js";

let db: Database;
let redis: RedisClient;
let author: TestUser;

useStores((s) => ({ db, redis, author } = s));

/** A proxy in front of the server `url` names (`defaultPort` when it names none). */
function proxyTo(url: string, defaultPort: number, scheme: string): Promise<TcpProxy> {
  const server = new URL(url);
  return startTcpProxy({ host: server.hostname, port: Number(server.port || defaultPort) }, scheme);
}

/** `url` through `proxy`: the same user, password and database or vhost, the proxy's address. */
function through(proxy: TcpProxy, url: string): string {
  const proxied = new URL(url);
  proxied.host = `127.0.0.1:${proxy.port}`;
  return proxied.toString();
}

/** Outbox entries not yet relayed (published and confirmed) for these posts. */
async function outboxLength(config: Config, posts: readonly LikeableTarget[]): Promise<number> {
  const keys = createRedisKeys(config.redisPartitions);
  const outboxes = [...new Set(posts.map((post) => keys.outbox(post)))];
  const lengths = await Promise.all(outboxes.map((outbox) => redis.xlen(outbox)));
  return lengths.reduce((sum, length) => sum + Number(length), 0);
}

const likeRows = (posts: readonly LikeableTarget[]) => db.like.count({ where: { targetType: "post", targetId: { in: posts.map((p) => p.id) } } });

describe("outages", () => {
  it("when RabbitMQ stops during a burst of likes and comes back, then every like succeeded and all reach PostgreSQL", async () => {
    const rabbit = await proxyTo(inject("amqpUrl"), 5672, "amqp");
    let pipeline: TestPipeline | undefined;
    try {
      const config = testConfig({ AMQP_URL: through(rabbit, inject("amqpUrl")) });
      const services = servicesOn({ db, redis }, config);
      pipeline = await startTestPipeline(config);
      const posts = await createPosts({ db, redis }, config, author.id, 5);
      let user = 0n;
      const burst = () => Promise.all(Array.from({ length: 200 }, (_, i) => services.memberships.join("like", posts[i % 5] as LikeableTarget, ++user)));
      await burst();

      rabbit.refuse();
      for (let round = 0; round < 5; round++) {
        const results = await burst();
        expect(results.every((r) => r.changed)).toBe(true);
      }
      // Long enough for the relay to try again and the consumers to reconnect, were the broker reachable.
      await sleep(1_000);
      // Nothing since the refusal was relayed: its 1,000 likes wait in the outbox, and none reached PostgreSQL.
      expect(await outboxLength(config, posts)).toBeGreaterThanOrEqual(1_000);
      expect(await likeRows(posts)).toBeLessThanOrEqual(200);
      const acceptedWhileRefused = rabbit.accepted;

      rabbit.resume();
      await burst();
      await agreeWithin({ db, redis }, config, posts, 90_000);
      expect(await likeRows(posts)).toBe(1_400);
      // The pipeline reconnected through the proxy after the outage.
      expect(rabbit.accepted).toBeGreaterThan(acceptedWhileRefused);
    } finally {
      rabbit.resume();
      await pipeline?.stop();
      await rabbit.close();
    }
  });

  it("when PostgreSQL restarts while events flow, then the consumers retry and converge", async () => {
    const databaseUrl = testConfig().databaseUrl;
    const postgres = await proxyTo(databaseUrl, 5432, "postgresql");
    let pipeline: TestPipeline | undefined;
    try {
      // Only the pipeline goes through the proxy; the test's own client (`db`) stays direct to check.
      const config = testConfig({ DATABASE_URL: through(postgres, databaseUrl) });
      const services = servicesOn({ db, redis }, config);
      pipeline = await startTestPipeline(config);
      const posts = await createPosts({ db, redis }, config, author.id, 5);
      let user = 0n;
      const flowing = (async () => {
        for (let round = 0; round < 30; round++) {
          await Promise.all(Array.from({ length: 50 }, (_, i) => services.memberships.join("like", posts[i % 5] as LikeableTarget, ++user)));
          await sleep(100);
        }
      })();
      await sleep(800);
      expect(postgres.accepted).toBeGreaterThan(0);

      // As a restart does: every pooled connection cut, reconnects refused until it is back.
      postgres.refuse();
      await sleep(300);
      const rowsWhileDown = await likeRows(posts);
      await sleep(2_500);
      expect(await likeRows(posts)).toBe(rowsWhileDown);
      expect(rowsWhileDown).toBeLessThan(1_500);
      const acceptedWhileDown = postgres.accepted;
      postgres.resume();

      await flowing;
      await agreeWithin({ db, redis }, config, posts, 90_000);
      expect(await likeRows(posts)).toBe(1_500);
      expect(postgres.accepted).toBeGreaterThan(acceptedWhileDown);
    } finally {
      postgres.resume();
      await pipeline?.stop();
      await postgres.close();
    }
  });

  it("when the service is killed with SIGKILL during a burst and restarted, then every acknowledged like is in PostgreSQL once", async () => {
    const config = testConfig();
    const env = { RELAY_CLAIM_IDLE_MS: "2000", PERSIST_LINGER_MS: "300" };
    const posts = await createPosts({ db, redis }, config, author.id, 4);
    const users = await createUsers(db, config, 400);
    let service = await startServiceProcess(config, env);
    const acknowledged: { post: bigint; user: bigint }[] = [];
    const like = `mutation($id: ID!) { likePost(postId: $id) { changed } }`;
    try {
      const gql = graphqlClient(service.url);
      const sending = Promise.all(
        users.map(async (u, i) => {
          await sleep(i * 3);
          const post = posts[i % 4] as LikeableTarget;
          const res = await gql<{ likePost: { changed: boolean } }>(like, { id: post.id.toString() }, u.token).catch(() => null);
          if (res?.data?.likePost.changed) acknowledged.push({ post: post.id, user: u.id });
        }),
      );
      // Killed once the burst is under way: some likes acknowledged, most still to send.
      await eventually(
        async () => acknowledged.length >= 20,
        30_000,
        () => `${acknowledged.length} likes acknowledged`,
      );
      expect(await service.stop("SIGKILL")).toBeNull();
      await sending;
      expect(acknowledged.length).toBeGreaterThan(0);
      expect(acknowledged.length).toBeLessThan(users.length);

      service = await startServiceProcess(config, env);
      await agreeWithin({ db, redis }, config, posts, 90_000);
      for (const { post, user } of acknowledged) {
        expect(await db.like.count({ where: { targetType: "post", targetId: post, userId: user } })).toBe(1);
      }
    } finally {
      await service.stop("SIGTERM");
    }
  });
});
