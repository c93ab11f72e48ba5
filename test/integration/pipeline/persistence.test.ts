// Likes flow from the Redis outbox through RabbitMQ into PostgreSQL, exactly once in effect.
import { describe, expect, it } from "vitest";
import type { Config } from "../../../src/config.js";
import type { Services } from "../../../src/domain/services.js";
import type { LikeableTarget } from "../../../src/domain/model/index.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { createRabbitConnection } from "../../../src/stores/rabbitmq/connection.js";
import { toChangeMessage } from "../../../src/stores/rabbitmq/messages.js";
import { createTopology } from "../../../src/stores/rabbitmq/topology.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { burstDeadlines, itOnSingle, silentLogger, testConfig, type TestUser } from "../../support/env.js";
import { eventually, startTestPipeline } from "../../support/pipeline.js";
import { agreeWithin, createPosts, servicesOn, useStores } from "../../support/stores.js";

let db: Database;
let redis: RedisClient;
let author: TestUser;

useStores((s) => ({ db, redis, author } = s));

function servicesFor(config: Config): Services {
  return servicesOn({ db, redis }, config);
}

/**
 * A publisher of the test's own onto the pipeline's exchange. The persist and
 * dead-letter queues are declared before the first publish: a message no queue is
 * bound for yet would be dropped.
 */
function publisherOf(config: Config) {
  const rabbit = createRabbitConnection(config.amqpUrl, silentLogger);
  const topology = createTopology({ prefix: config.rabbitmq.prefix, persistQueues: config.persist.queues, queueType: config.rabbitmq.queueType });
  const declared = topology.persistQueues.map((_, q) => topology.persistQueue(q));
  const publisher = rabbit.createPublisher({
    confirm: true,
    exchanges: topology.exchanges,
    queues: [...declared.map((d) => d.queueOptions), topology.deadQueueOptions],
    queueBindings: declared.flatMap((d) => d.queueBindings),
  });
  return { rabbit, topology, publisher };
}

describe("persistence pipeline", () => {
  it("when 5,000 likes and 1,000 unlikes hit 20 posts, then PostgreSQL rows and counters equal Redis", async () => {
    const config = testConfig(burstDeadlines);
    const services = servicesFor(config);
    const pipeline = await startTestPipeline(config);
    try {
      const posts = await createPosts({ db, redis }, config, author.id, 20);
      const likes = Array.from({ length: 5_000 }, (_, i) => ({ target: posts[i % 20] as LikeableTarget, user: BigInt(1 + Math.floor(i / 20)) }));
      for (let i = 0; i < likes.length; i += 500) {
        await Promise.all(likes.slice(i, i + 500).map((l) => services.memberships.join("like", l.target, l.user)));
      }
      const unlikes = likes.filter((_, i) => i % 5 === 0);
      await Promise.all(unlikes.map((l) => services.memberships.leave("like", l.target, l.user)));
      await agreeWithin({ db, redis }, config, posts);
      const total = await db.like.count({ where: { targetType: "post", targetId: { in: posts.map((p) => p.id) } } });
      expect(total).toBe(4_000);
      const received = await db.counter.findUnique({ where: { targetType_targetId_name: { targetType: "user", targetId: author.id, name: "likesReceived" } } });
      expect(Number(received?.value)).toBeGreaterThanOrEqual(4_000);
    } finally {
      await pipeline.stop();
    }
  });

  it("when two workers run side by side, then every change is applied once and both stores agree", async () => {
    const config = testConfig({ PERSIST_BATCH_SIZE: "200", PERSIST_LINGER_MS: "200", ...burstDeadlines });
    const services = servicesFor(config);
    const [first, second] = await Promise.all([startTestPipeline(config), startTestPipeline(config)]);
    try {
      const posts = await createPosts({ db, redis }, config, author.id, 10);
      for (let round = 0; round < 5; round++) {
        await Promise.all(
          Array.from({ length: 400 }, (_, i) => services.memberships.join("like", posts[i % 10] as LikeableTarget, BigInt(round * 400 + i + 1))),
        );
        await Promise.all(
          Array.from({ length: 100 }, (_, i) => services.memberships.leave("like", posts[i % 10] as LikeableTarget, BigInt(round * 400 + i + 1))),
        );
      }
      await agreeWithin({ db, redis }, config, posts);
      expect(await db.like.count({ where: { targetType: "post", targetId: { in: posts.map((p) => p.id) } } })).toBe(1_500);
      const published = async (p: typeof first) => (await p.metrics.eventsPublished.get()).values[0]?.value ?? 0;
      expect((await published(first)) + (await published(second))).toBeGreaterThanOrEqual(2_500);
    } finally {
      await Promise.all([first.stop(), second.stop()]);
    }
  });

  it("when a user likes and unlikes within one batch and across batches, then PostgreSQL ends unliked with the count right", async () => {
    const config = testConfig({ PERSIST_LINGER_MS: "1500" });
    const services = servicesFor(config);
    const pipeline = await startTestPipeline(config);
    try {
      const [sameBatch, acrossBatches] = await createPosts({ db, redis }, config, author.id, 2);
      await services.memberships.join("like", sameBatch as LikeableTarget, 5n);
      await services.memberships.join("like", sameBatch as LikeableTarget, 6n);
      await services.memberships.leave("like", sameBatch as LikeableTarget, 5n);
      await services.memberships.join("like", acrossBatches as LikeableTarget, 5n);
      await agreeWithin({ db, redis }, config, [acrossBatches as LikeableTarget]);
      await services.memberships.leave("like", acrossBatches as LikeableTarget, 5n);
      await agreeWithin({ db, redis }, config, [sameBatch as LikeableTarget, acrossBatches as LikeableTarget]);
      const rows = await db.like.findMany({ where: { targetId: { in: [sameBatch!.id, acrossBatches!.id] } }, select: { targetId: true, userId: true } });
      expect(rows).toEqual([{ targetId: sameBatch!.id, userId: 6n }]);
    } finally {
      await pipeline.stop();
    }
  });

  it("when a consumer crashes between the database commit and the ack, then the redelivery applies nothing twice", async () => {
    const config = testConfig();
    const services = servicesFor(config);
    let crashes = 0;
    let batches = 0;
    const pipeline = await startTestPipeline(config, {
      afterBatchApplied: async () => {
        batches++;
        if (crashes === 0) {
          crashes++;
          throw new Error("injected crash after commit, before ack");
        }
      },
    });
    try {
      const posts = await createPosts({ db, redis }, config, author.id, 3);
      await Promise.all(posts.flatMap((p) => Array.from({ length: 50 }, (_, u) => services.memberships.join("like", p, BigInt(u + 1)))));
      await agreeWithin({ db, redis }, config, posts);
      // The crashed batch's messages come back and are applied again: a no-op.
      await eventually(
        async () => batches >= 2,
        30_000,
        () => `only ${batches} batch(es) committed`,
      );
      await agreeWithin({ db, redis }, config, posts);
      expect(crashes).toBe(1);
      expect(await db.like.count({ where: { targetType: "post", targetId: { in: posts.map((p) => p.id) } } })).toBe(150);
    } finally {
      await pipeline.stop();
    }
  });

  itOnSingle("when a poison message arrives, then it lands in the dead-letter queue with its reason and later likes still flow", async () => {
    const config = testConfig();
    const services = servicesFor(config);
    const pipeline = await startTestPipeline(config);
    const { rabbit, topology, publisher } = publisherOf(config);
    try {
      await publisher.send(
        { exchange: topology.exchange, routingKey: topology.eventRoutingKey(3), durable: true },
        { eventId: "poison-1", target: { type: "planet", id: "x" } },
      );
      const [post] = await createPosts({ db, redis }, config, author.id, 1);
      await services.memberships.join("like", post as LikeableTarget, 77n);
      await agreeWithin({ db, redis }, config, [post as LikeableTarget]);
      let dead: Awaited<ReturnType<typeof rabbit.basicGet>>;
      await eventually(
        async () => (dead = await rabbit.basicGet({ queue: topology.deadQueue, noAck: true })) !== undefined,
        10_000,
        () => "dead-letter queue stayed empty",
      );
      expect(dead?.body).toEqual({ eventId: "poison-1", target: { type: "planet", id: "x" } });
      expect(String(dead?.headers?.["x-reason"])).toMatch(/invalid change: .*target\.type/);
      expect((await pipeline.metrics.deadLettered.get()).values[0]?.value).toBe(1);
    } finally {
      await publisher.close();
      await rabbit.close();
      await pipeline.stop();
    }
  });

  itOnSingle("when the queues are quorum queues, as by default, then likes flow through them and the broker keeps each queue's type", async () => {
    const config = testConfig({ RABBITMQ_QUEUE_TYPE: "quorum" });
    const services = servicesFor(config);
    const pipeline = await startTestPipeline(config);
    const rabbit = createRabbitConnection(config.amqpUrl, silentLogger);
    try {
      const posts = await createPosts({ db, redis }, config, author.id, 2);
      await Promise.all(Array.from({ length: 100 }, (_, i) => services.memberships.join("like", posts[i % 2] as LikeableTarget, BigInt(i + 1))));
      await agreeWithin({ db, redis }, config, posts);
      // The same queue declared as a classic one is refused: the pipeline declared a quorum queue.
      const classic = createTopology({ prefix: config.rabbitmq.prefix, persistQueues: config.persist.queues, queueType: "classic" });
      await expect(rabbit.queueDeclare(classic.persistQueue(0).queueOptions)).rejects.toThrow(/inequivalent arg 'x-queue-type'/);
    } finally {
      await rabbit.close();
      await pipeline.stop();
    }
  });

  itOnSingle("when many small messages wait and batches linger long, then the consumer cuts a batch once it holds all it may and nothing stalls", async () => {
    // 200 single-change messages (as an older relay sends them) against a 5 s linger: a consumer
    // that waited out the linger with 16 messages in hand would need over a minute.
    const config = testConfig({ PERSIST_LINGER_MS: "5000" });
    const pipeline = await startTestPipeline(config);
    const { rabbit, topology, publisher } = publisherOf(config);
    try {
      const [post] = await createPosts({ db, redis }, config, author.id, 1);
      const target = post as LikeableTarget;
      const partition = Number(target.id % BigInt(config.redisPartitions));
      await Promise.all(
        Array.from({ length: 200 }, (_, i) => {
          const user = BigInt(i + 1);
          const change = {
            kind: "relation",
            relation: "like",
            target,
            userId: user,
            authorId: author.id,
            member: true,
            version: 1_000_000n + user,
            at: new Date(),
          } as const;
          return publisher.send(
            { exchange: topology.exchange, routingKey: topology.eventRoutingKey(partition), durable: true },
            toChangeMessage({ partition, entryId: `${user}-0`, change }),
          );
        }),
      );
      const rows = () => db.like.count({ where: { targetType: "post", targetId: target.id } });
      await eventually(
        async () => (await rows()) === 200,
        20_000,
        async () => `${await rows()} of 200 likes persisted`,
      );
    } finally {
      await publisher.close();
      await rabbit.close();
      await pipeline.stop();
    }
  });

  itOnSingle("when likes flow steadily, then PostgreSQL sees at most 20 commits per 1,000 events", async () => {
    const config = testConfig({ PERSIST_LINGER_MS: "1000" });
    const services = servicesFor(config);
    const pipeline = await startTestPipeline(config);
    try {
      const posts = await createPosts({ db, redis }, config, author.id, 10);
      const committedBefore = (await pipeline.metrics.persistBatches.get()).values[0]?.value ?? 0;
      const persistedBefore = (await pipeline.metrics.eventsPersisted.get()).values[0]?.value ?? 0;
      // About 3,000 likes a second for two seconds.
      for (let round = 0; round < 20; round++) {
        await Promise.all(
          Array.from({ length: 300 }, (_, i) => services.memberships.join("like", posts[i % 10] as LikeableTarget, BigInt(round * 1_000 + i + 1))),
        );
        await new Promise((r) => setTimeout(r, 100));
      }
      await agreeWithin({ db, redis }, config, posts);
      const commits = ((await pipeline.metrics.persistBatches.get()).values[0]?.value ?? 0) - committedBefore;
      const events = ((await pipeline.metrics.eventsPersisted.get()).values[0]?.value ?? 0) - persistedBefore;
      expect(events).toBeGreaterThanOrEqual(6_000);
      expect((commits / events) * 1_000).toBeLessThanOrEqual(20);
    } finally {
      await pipeline.stop();
    }
  });
});
