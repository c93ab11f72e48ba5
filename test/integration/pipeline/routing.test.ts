// Routing that cannot strand a change: one queue per partition whatever the
// configuration history, publishes that fail unless a queue took them (or when
// the broker stalls), and changes PostgreSQL refused applied again later.
import { setTimeout as sleep } from "node:timers/promises";
import { Connection } from "rabbitmq-client";
import { describe, expect, it } from "vitest";
import type { Config } from "../../../src/config.js";
import type { LikeableTarget, OutboxEntry } from "../../../src/domain/model/index.js";
import type { Database } from "../../../src/stores/postgres/database.js";
import { PublishFailedError } from "../../../src/stores/rabbitmq/confirmed-publisher.js";
import { createMessageBus } from "../../../src/stores/rabbitmq/message-bus.js";
import { PartitioningChangeRefusedError } from "../../../src/stores/rabbitmq/partitioning.js";
import { createTopology } from "../../../src/stores/rabbitmq/topology.js";
import type { RedisClient } from "../../../src/stores/redis/client.js";
import { createRedisKeys } from "../../../src/stores/redis/keys.js";
import { createOutboxStore } from "../../../src/stores/redis/outbox-store.js";
import { startTcpProxy } from "../../support/tcp-proxy.js";
import { privateRedisUrl, silentLogger, testConfig as classicConfig, type TestUser, uniqueTag } from "../../support/env.js";
import { eventually, startTestPipeline } from "../../support/pipeline.js";
import { compose } from "../../../src/compose.js";
import { openClients } from "../../../src/stores/clients.js";
import { agreeWithin, createPosts, servicesOn, useStores } from "../../support/stores.js";

/** The deployment's queues as they run by default, quorum queues: how they are declared, retired and taken over is what this file tests. */
const testConfig = (overrides: Record<string, string> = {}) => classicConfig({ RABBITMQ_QUEUE_TYPE: "quorum", ...overrides });

let db: Database;
let redis: RedisClient;
let author: TestUser;

useStores((s) => ({ db, redis, author } = s));

const topologyOf = (config: Config) =>
  createTopology({
    prefix: config.rabbitmq.prefix,
    persistQueues: config.persist.queues,
    queueType: config.rabbitmq.queueType,
    retryDelayMs: config.persist.retryDelayMs,
  });

/** A message bus of the test's own, on `url` (the broker, or a proxy in front of it). */
function busOf(config: Config, url = config.amqpUrl) {
  const rabbit = new Connection({ url, retryLow: 100, retryHigh: 500 });
  rabbit.on("error", () => {});
  const bus = createMessageBus(rabbit, topologyOf(config), silentLogger, { publishTimeoutMs: config.rabbitmq.publishTimeoutMs });
  return {
    rabbit,
    bus,
    async close() {
      await bus.close().catch(() => {});
      await rabbit.close();
    },
  };
}

/** Starts a pipeline that must refuse to start: the error, its clients closed. */
async function refusalOf(config: Config): Promise<unknown> {
  const clients = await openClients(config, silentLogger, { rabbit: true, relay: true });
  try {
    const pipeline = await compose(config, clients, silentLogger).startPipeline();
    await pipeline.close();
    return null;
  } catch (error) {
    return error;
  } finally {
    await clients.close();
  }
}

function entryOf(partition: number, user: bigint): OutboxEntry {
  return {
    partition,
    entryId: `${Date.now()}-${user}`,
    change: {
      kind: "relation",
      relation: "like",
      target: { type: "post", id: 1n },
      userId: user,
      authorId: null,
      member: true,
      version: BigInt(Date.now()) * 1000n,
      at: new Date(),
    },
  };
}

describe("routing", () => {
  it("when no queue is bound for a partition, then the relay's publish fails and the change stays in the outbox until one is", async () => {
    const config = testConfig({ PERSIST_QUEUES: "1" });
    const services = servicesOn({ db, redis }, config);
    const topology = topologyOf(config);
    const outbox = createOutboxStore(redis, createRedisKeys(config.redisPartitions), { batchSize: 100 });
    const pipeline = await startTestPipeline(config);
    const admin = busOf(config);
    try {
      const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
      await services.memberships.join("like", post, 1n);
      await agreeWithin({ db, redis }, config, [post]);
      const [binding] = topology.persistQueue(0).queueBindings;
      await admin.rabbit.queueUnbind(binding!);

      await services.memberships.join("like", post, 2n);
      // Several relay rounds: each publish is returned, so the entry must stay.
      await sleep(1_500);
      expect(await outbox.length()).toBe(1);
      expect(await db.like.count({ where: { targetType: "post", targetId: post.id } })).toBe(1);

      await admin.rabbit.queueBind(binding!);
      await agreeWithin({ db, redis }, config, [post]);
      expect(await db.like.count({ where: { targetType: "post", targetId: post.id } })).toBe(2);
    } finally {
      await admin.close();
      await pipeline.stop();
    }
  });

  it("when the broker connection stalls, then like changes, repairs and dead letters fail within the publish timeout", async () => {
    const config = testConfig({ RABBITMQ_PUBLISH_TIMEOUT_MS: "500" });
    const amqp = new URL(config.amqpUrl);
    const proxy = await startTcpProxy({ host: amqp.hostname, port: Number(amqp.port) }, "amqp");
    const proxied = new URL(config.amqpUrl);
    proxied.port = String(proxy.port);
    const proxiedBus = busOf(config, proxied.toString());
    const { bus } = proxiedBus;
    try {
      await bus.publishChanges([entryOf(0, 1n)]);
      proxy.stall();
      const outcomes = await Promise.allSettled([
        bus.publishChanges([entryOf(0, 2n)]),
        bus.publishRepairs([{ kind: "recountDatabase", relation: "like", target: { type: "post", id: 1n } }]),
        bus.deadLetter({ any: "thing" }, "test", "test"),
      ]);
      for (const outcome of outcomes) {
        expect(outcome.status).toBe("rejected");
        expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(PublishFailedError);
      }
    } finally {
      proxy.resume();
      await proxiedBus.close();
      await proxy.close();
    }
  });

  it("when PostgreSQL refuses a valid change for a while, then it is applied again later and the stores agree, with nothing dead-lettered", async () => {
    const config = testConfig({ PERSIST_RETRY_DELAY_MS: "300", PERSIST_LINGER_MS: "50" });
    const services = servicesOn({ db, redis }, config);
    const refusedUser = 900_000_000_000n + BigInt(Math.floor(Math.random() * 1_000_000));
    const tag = uniqueTag();
    // nextval survives the rollback of the refused transaction: it counts the refusals.
    await db.$executeRawUnsafe(`CREATE SEQUENCE refusals_${tag}`);
    await db.$executeRawUnsafe(
      `CREATE FUNCTION refuse_${tag}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM nextval('refusals_${tag}'); RAISE EXCEPTION 'refused by test'; END $$`,
    );
    await db.$executeRawUnsafe(
      `CREATE TRIGGER refuse_${tag} BEFORE INSERT ON likes FOR EACH ROW WHEN (NEW.user_id = ${refusedUser}) EXECUTE FUNCTION refuse_${tag}()`,
    );
    const refusals = async () => Number((await db.$queryRawUnsafe<{ n: string }[]>(`SELECT last_value::text AS n FROM refusals_${tag}`))[0]?.n);
    const pipeline = await startTestPipeline(config);
    const admin = busOf(config);
    try {
      const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
      await services.memberships.join("like", post, refusedUser);
      await services.memberships.join("like", post, 5n);
      // Three refusals in the first delivery; a fourth means it came back from the retry queue.
      await eventually(
        async () => (await refusals()) >= 4,
        30_000,
        async () => `refused ${await refusals()} times`,
      );
      await db.$executeRawUnsafe(`DROP TRIGGER refuse_${tag} ON likes`);

      await agreeWithin({ db, redis }, config, [post]);
      expect(await db.like.count({ where: { targetType: "post", targetId: post.id, userId: refusedUser } })).toBe(1);
      const dead = await admin.rabbit.queueDeclare({ queue: topologyOf(config).deadQueue, passive: true });
      expect(dead.messageCount).toBe(0);
    } finally {
      await db.$executeRawUnsafe(`DROP TRIGGER IF EXISTS refuse_${tag} ON likes`);
      await db.$executeRawUnsafe(`DROP FUNCTION IF EXISTS refuse_${tag}()`);
      await db.$executeRawUnsafe(`DROP SEQUENCE IF EXISTS refusals_${tag}`);
      await admin.close();
      await pipeline.stop();
    }
  });

  it("when Redis is unreachable after PostgreSQL committed a batch, then the batch is retried whole until Redis answers, not split into the retry queue as refused", async () => {
    const url = new URL(privateRedisUrl());
    const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
    const config = testConfig({ REDIS_URL: proxy.url, REDIS_COMMAND_TIMEOUT_MS: "300", PERSIST_RETRY_DELAY_MS: "60000", PERSIST_LINGER_MS: "50" });
    const keys = createRedisKeys(config.redisPartitions);
    const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
    const user = 800_000_000_000n + BigInt(Math.floor(Math.random() * 1_000_000));
    const pipeline = await startTestPipeline(config);
    const admin = busOf(config);
    try {
      proxy.refuse();
      const change = {
        kind: "relation",
        relation: "like",
        target: post,
        userId: user,
        authorId: author.id,
        member: true,
        version: BigInt(Date.now()) * 1000n,
        at: new Date(),
      } as const;
      await admin.bus.publishChanges([{ partition: Number(post.id % BigInt(config.redisPartitions)), entryId: `${Date.now()}-${user}`, change }]);
      await eventually(
        async () => (await db.like.count({ where: { targetType: "post", targetId: post.id, userId: user } })) === 1,
        10_000,
        () => "the like was not committed",
      );
      // Long enough for the attempts after which a refused change is split off to the retry queue.
      await sleep(4_000);
      const waiting = await admin.rabbit.queueDeclare({ queue: topologyOf(config).changeRetryQueue.queue, passive: true });
      expect(waiting.messageCount).toBe(0);

      proxy.resume();
      // What follows the commit reaches Redis: the user's list records the like.
      await eventually(
        async () => (await redis.hexists(keys.list("like", user).recent, post.id.toString())) === 1,
        15_000,
        () => "the list never heard of the like",
      );
    } finally {
      proxy.resume();
      await admin.close();
      await pipeline.stop();
      await proxy.close();
    }
  });

  it("when Redis refuses what follows a commit (a key of the wrong type), then that change waits in the retry queue without holding back the others, and completes once Redis takes it", async () => {
    const config = testConfig({ PERSIST_RETRY_DELAY_MS: "1000", PERSIST_LINGER_MS: "50" });
    const keys = createRedisKeys(config.redisPartitions);
    const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
    const base = 810_000_000_000n + BigInt(Math.floor(Math.random() * 1_000_000)) * 2n;
    const [blocked, other] = [base, base + 1n];
    // The list's records must be a hash: as a string, every write of the list fails, a fault of the key and not an outage.
    await redis.set(keys.list("like", blocked).recent, "not a hash");
    const pipeline = await startTestPipeline(config);
    const admin = busOf(config);
    const likeBy = (userId: bigint) => ({
      partition: Number(post.id % BigInt(config.redisPartitions)),
      entryId: `${Date.now()}-${userId}`,
      change: {
        kind: "relation",
        relation: "like",
        target: post,
        userId,
        authorId: author.id,
        member: true,
        version: BigInt(Date.now()) * 1000n,
        at: new Date(),
      } as const,
    });
    const listed = async (userId: bigint) =>
      (await redis.type(keys.list("like", userId).recent)) === "hash" && (await redis.hexists(keys.list("like", userId).recent, post.id.toString())) === 1;
    try {
      await admin.bus.publishChanges([likeBy(blocked)]);
      await eventually(
        async () => (await db.like.count({ where: { targetType: "post", targetId: post.id, userId: blocked } })) === 1,
        10_000,
        () => "the like was not committed",
      );
      await sleep(3_000);
      await admin.bus.publishChanges([likeBy(other)]);
      await eventually(
        () => listed(other),
        10_000,
        () => "a later change was held back behind the refused one",
      );
      expect(await listed(blocked)).toBe(false);

      await redis.del(keys.list("like", blocked).recent);
      await eventually(
        () => listed(blocked),
        15_000,
        () => "the refused change never completed",
      );
      const dead = await admin.rabbit.queueDeclare({ queue: topologyOf(config).deadQueue, passive: true });
      expect(dead.messageCount).toBe(0);
    } finally {
      await redis.del(keys.list("like", blocked).recent);
      await admin.close();
      await pipeline.stop();
    }
  });

  it("when PERSIST_QUEUES changes while a process runs with the old value, then the new one refuses to start", async () => {
    const config = testConfig({ PERSIST_QUEUES: "2" });
    const changed = { ...config, persist: { ...config.persist, queues: 3 } };
    const running = await startTestPipeline(config);
    try {
      expect(await refusalOf(changed)).toBeInstanceOf(PartitioningChangeRefusedError);
      // Nor can a publisher with the new value route anything.
      const other = busOf(changed);
      try {
        await expect(other.bus.publishChanges([entryOf(3, 1n)])).rejects.toThrow();
      } finally {
        await other.close();
      }
    } finally {
      await running.stop();
    }
  });

  it("when PERSIST_QUEUES is lowered while an old queue holds changes, then the new process applies them under the old routing first, and the old queue goes", async () => {
    const config = testConfig({ PERSIST_QUEUES: "2" });
    const lowered = { ...config, persist: { ...config.persist, queues: 1 } };
    const topology = topologyOf(config);
    const old = busOf(config);
    const stale = busOf(config);
    try {
      const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
      // A change left in queue 1 by a process that stopped before consuming it.
      await old.bus.open();
      const left = entryOf(1, 7n);
      await old.bus.publishChanges([{ ...left, change: { ...left.change, target: post } }]);

      const pipeline = await startTestPipeline(lowered);
      await pipeline.stop();
      expect(await db.like.count({ where: { targetType: "post", targetId: post.id, userId: 7n } })).toBe(1);
      await expect(old.rabbit.queueDeclare({ queue: topology.persistQueueName(1), passive: true })).rejects.toMatchObject({ code: "NOT_FOUND" });
      // The old value's publisher can no longer publish, even to the queue both values share.
      await expect(stale.bus.publishChanges([entryOf(0, 2n)])).rejects.toThrow(/x-max-length/);
    } finally {
      await stale.close();
      await old.close();
    }
  });

  it("when two processes with a new PERSIST_QUEUES start at once over leftover changes, then one takes over, the other starts after it or refuses, and each change is applied", async () => {
    const config = testConfig({ PERSIST_QUEUES: "2" });
    const raised = { ...config, persist: { ...config.persist, queues: 3 } };
    const old = busOf(config);
    try {
      const [post] = (await createPosts({ db, redis }, config, author.id, 1)) as [LikeableTarget];
      await old.bus.open();
      const leftovers = [0, 1].map((partition) => {
        const entry = entryOf(partition, BigInt(10 + partition));
        return { ...entry, change: { ...entry.change, target: post } };
      });
      await old.bus.publishChanges(leftovers);

      const clients = await Promise.all([0, 1].map(() => openClients(raised, silentLogger, { rabbit: true, relay: true })));
      try {
        const starts = await Promise.allSettled(clients.map((c) => compose(raised, c, silentLogger).startPipeline()));
        expect(starts.some((s) => s.status === "fulfilled")).toBe(true);
        for (const start of starts) {
          if (start.status === "rejected") expect(start.reason).toBeInstanceOf(PartitioningChangeRefusedError);
          else await start.value.close();
        }
      } finally {
        await Promise.all(clients.map((c) => c.close()));
      }
      expect(await db.like.count({ where: { targetType: "post", targetId: post.id } })).toBe(2);
      // The deployment now routes by three queues: a process with three starts at once.
      const again = await startTestPipeline(raised);
      await again.stop();
    } finally {
      await old.close();
    }
  });
});
