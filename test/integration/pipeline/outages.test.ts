// Nothing acknowledged is lost across a RabbitMQ outage, a PostgreSQL restart or a
// kill -9 of the service. Each test restores what it stops.
import { execFileSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import type { LikeableTarget } from "../../../src/domain/model/index.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createUsers, graphqlClient, testConfig, type TestUser } from "../../support/env.js";
import { startTestPipeline } from "../../support/pipeline.js";
import { agreeWithin, createPosts, servicesOn, useStores } from "../../support/stores.js";
import { startServiceProcess } from "../../support/service-process.js";

let db: Database;
let redis: RedisClient;
let author: TestUser;

const rabbitmqctl = (...args: string[]) => execFileSync("rabbitmqctl", args, { stdio: "pipe" });
const postgresVersion = () => readdirSync("/etc/postgresql").sort().at(-1) as string;
const pgctl = (action: string) => execFileSync("pg_ctlcluster", ["--skip-systemctl-redirect", postgresVersion(), "main", action], { stdio: "pipe" });

async function rabbitRunning(): Promise<boolean> {
  try {
    rabbitmqctl("await_startup", "--timeout", "2");
    return true;
  } catch {
    return false;
  }
}

useStores((s) => ({ db, redis, author } = s));
afterEach(async () => {
  // Restore whatever a failed test left stopped.
  if (!(await rabbitRunning())) rabbitmqctl("start_app");
  try {
    pgctl("start");
  } catch {
    // Already running.
  }
});



describe("outages", () => {
  it("when RabbitMQ stops during a burst of likes and comes back, then every like succeeded and all reach PostgreSQL", async () => {
    const config = testConfig();
    const services = servicesOn({ db, redis }, config);
    const pipeline = await startTestPipeline(config);
    try {
      const posts = await createPosts({ db, redis }, config, author.id, 5);
      let user = 0n;
      const burst = () => Promise.all(Array.from({ length: 200 }, (_, i) => services.memberships.join("like", posts[i % 5] as LikeableTarget, ++user)));
      await burst();
      rabbitmqctl("stop_app");
      for (let round = 0; round < 5; round++) {
        const results = await burst();
        expect(results.every((r) => r.changed)).toBe(true);
      }
      expect(Number(await redis.xlen(`ob:{${Number(posts[0]!.id % BigInt(config.redisPartitions))}}`))).toBeGreaterThan(0);
      rabbitmqctl("start_app");
      await burst();
      await agreeWithin({ db, redis }, config, posts, 90_000);
      expect(await db.like.count({ where: { targetType: "post", targetId: { in: posts.map((p) => p.id) } } })).toBe(1_400);
    } finally {
      if (!(await rabbitRunning())) rabbitmqctl("start_app");
      await pipeline.stop();
    }
  });

  it("when PostgreSQL restarts while events flow, then the consumers retry and converge", async () => {
    const config = testConfig();
    const services = servicesOn({ db, redis }, config);
    const pipeline = await startTestPipeline(config);
    try {
      const posts = await createPosts({ db, redis }, config, author.id, 5);
      let user = 0n;
      const flowing = (async () => {
        for (let round = 0; round < 30; round++) {
          await Promise.all(Array.from({ length: 50 }, (_, i) => services.memberships.join("like", posts[i % 5] as LikeableTarget, ++user)));
          await sleep(100);
        }
      })();
      await sleep(800);
      pgctl("stop");
      await sleep(1_500);
      pgctl("start");
      await flowing;
      await agreeWithin({ db, redis }, config, posts, 90_000);
      expect(await db.like.count({ where: { targetType: "post", targetId: { in: posts.map((p) => p.id) } } })).toBe(1_500);
    } finally {
      await pipeline.stop();
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
      await sleep(600);
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
