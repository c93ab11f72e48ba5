// The faults of `npm run chaos`, each injected while the load runs. A case says
// how the service runs (npm start's supervisor, or API and worker as separate
// processes), whether its Redis keeps an AOF, and what it does to which
// private instance when. The last fourteen measure targets of their own (figures)
// besides what every case checks; each lives in a file of its own.
import { setTimeout as sleep } from "node:timers/promises";
import { createRedisClient } from "../../src/stores/redis/client.js";
import { createRedisKeys } from "../../src/stores/redis/keys.js";
import { createRebuildStore } from "../../src/stores/redis/rebuild-store.js";
import { at, type ChaosCase, type FaultContext } from "./case.js";
import { coldCrawl } from "./cold-crawl.js";
import { coldReaders } from "./cold-readers.js";
import { clusterFailover, clusterFailoverLag, clusterFailoverLagAcks } from "./cluster-failover.js";
import { failover, failoverLag, failoverLagAcks, sentinelFailover } from "./failover.js";
import { clockAhead, clockBehind, heldWrite } from "./held-write.js";
import { outageRestart } from "./outage-restart.js";
import { readinessHammer } from "./readiness-hammer.js";
import { redisUnreachable } from "./redis-unreachable.js";
import { stallShutdown } from "./stall-shutdown.js";
import { subscribeCrawl } from "./subscribe-crawl.js";

export type { ChaosCase, FaultContext, Layout } from "./case.js";

/**
 * RabbitMQ out of reach for a while first, so the outbox holds a backlog when
 * Redis is killed: what a crash can lose is what the outbox holds, and a relay
 * that keeps up leaves it almost empty (the case would then prove little).
 */
async function crashRedis(ctx: FaultContext): Promise<void> {
  await at(ctx, 2_000);
  ctx.note("RabbitMQ refused (the outbox fills)");
  ctx.amqpProxy.refuse();
  await at(ctx, 3_500);
  ctx.note("Redis kill -9");
  await ctx.redis.crashAndRestart(500);
  ctx.note(`Redis started again (${ctx.redis.appendOnly ? "replaying its AOF" : "empty: no AOF"})`);
  ctx.amqpProxy.resume();
  ctx.note("RabbitMQ reachable again");
}

export const cases: readonly ChaosCase[] = [
  {
    name: "redis-resets",
    summary: "the proxy resets every Redis connection (API and pipeline) 30 times over 3 s",
    layout: "npm start",
    redisAppendOnly: true,
    loadSeconds: 7,
    async inject(ctx) {
      await at(ctx, 2_000);
      ctx.note("resetting Redis connections every 100 ms");
      for (let i = 0; i < 30; i++) {
        ctx.redisProxy.reset();
        await sleep(100);
      }
      ctx.note("resets over");
    },
  },
  {
    name: "redis-stall",
    summary: "Redis frozen (SIGSTOP) for 5 s, then SIGCONT; requests meanwhile should fail with SERVICE_UNAVAILABLE",
    layout: "npm start",
    redisAppendOnly: true,
    loadSeconds: 10,
    async inject(ctx) {
      await at(ctx, 2_000);
      ctx.note("Redis SIGSTOP");
      ctx.redis.freeze();
      await sleep(5_000);
      ctx.redis.thaw();
      ctx.note("Redis SIGCONT");
    },
  },
  {
    name: "redis-restart-aof",
    summary: "Redis kill -9 and restart, appendonly yes, appendfsync everysec, with 1.5 s of likes in the outbox (RabbitMQ refused)",
    layout: "npm start",
    redisAppendOnly: true,
    loadSeconds: 7,
    inject: crashRedis,
  },
  {
    name: "redis-restart-volatile",
    summary: "Redis kill -9 and restart without persistence (REDIS_DURABILITY=volatile), with 1.5 s of likes in the outbox (RabbitMQ refused)",
    layout: "npm start",
    redisAppendOnly: false,
    env: { REDIS_DURABILITY: "volatile" },
    // The load stops as Redis comes back: later operations would overwrite most lost states and hide the loss.
    loadSeconds: 4,
    expectsLoss: "expected to lose what the outbox held",
    viewsMayBeLost: "any",
    inject: crashRedis,
  },
  {
    name: "api-kill",
    summary: "the API process (api.ts, worker apart) kill -9, started again after 1 s; it loses the views it held since its last flush",
    layout: "api + worker",
    redisAppendOnly: true,
    loadSeconds: 8,
    viewsMayBeLost: "flushWindow",
    async inject(ctx) {
      await at(ctx, 2_500);
      ctx.note("API kill -9");
      await ctx.process("api").crash();
      await sleep(1_000);
      await ctx.restart("api");
      ctx.note("API serving again");
    },
  },
  {
    name: "worker-kill",
    summary: "the worker (worker.ts) kill -9 twice, each time started again after 1 s",
    layout: "api + worker",
    redisAppendOnly: true,
    loadSeconds: 8,
    async inject(ctx) {
      for (const when of [2_000, 5_000]) {
        await at(ctx, when);
        ctx.note("worker kill -9");
        await ctx.process("worker").crash();
        await sleep(1_000);
        await ctx.restart("worker");
        ctx.note("worker running again");
      }
    },
  },
  {
    name: "rabbitmq-loss",
    summary: "the proxy drops the pipeline's RabbitMQ connections and refuses new ones for 4 s",
    layout: "npm start",
    redisAppendOnly: true,
    loadSeconds: 8,
    async inject(ctx) {
      await at(ctx, 2_000);
      ctx.note("RabbitMQ connections dropped, new ones refused");
      ctx.amqpProxy.refuse();
      await sleep(4_000);
      ctx.amqpProxy.resume();
      ctx.note("RabbitMQ reachable again");
    },
  },
  {
    name: "postgres-restart",
    summary: "the private PostgreSQL stopped as a crash would (immediate mode), started again after 2 s",
    layout: "npm start",
    redisAppendOnly: true,
    loadSeconds: 8,
    unavailable: (postgres) => postgres.restartUnavailable,
    async inject(ctx) {
      await at(ctx, 2_500);
      ctx.note("PostgreSQL stop -m immediate");
      await ctx.postgres.crashAndRestart(2_000);
      ctx.note("PostgreSQL started again");
    },
  },
  {
    name: "rebuild-burst",
    summary:
      "the hot post taken out of Redis whole 4 times during the burst with its changes in flight (the drop that reconcile and late replays use), so it is rebuilt from PostgreSQL; two persist lanes, small batches",
    layout: "npm start",
    redisAppendOnly: true,
    // Small batches that commit often, two at a time (the batcher's two lanes), over two queues.
    env: { PERSIST_QUEUES: "2", PERSIST_BATCH_SIZE: "20", PERSIST_LINGER_MS: "50" },
    loadSeconds: 8,
    async inject(ctx) {
      const keys = createRedisKeys(ctx.partitions);
      const target = { type: "post" as const, id: BigInt(ctx.hotPostId) };
      // The service's own client and store: a drop is one script, the target's keys leave together.
      const client = createRedisClient({ url: ctx.redis.url, clusterNodes: [] });
      await client.connect();
      try {
        const rebuilds = createRebuildStore(client, keys);
        for (const when of [1_500, 3_000, 4_500, 6_000]) {
          await at(ctx, when);
          ctx.note(`hot post dropped: ${await rebuilds.drop(target)}`);
        }
      } finally {
        client.disconnect();
      }
    },
  },
  {
    name: "reconcile-burst",
    summary: "a full reconcile pass (npm run reconcile's entry) run twice during the burst",
    layout: "npm start",
    redisAppendOnly: true,
    loadSeconds: 9,
    async inject(ctx) {
      await at(ctx, 1_000);
      for (let pass = 1; pass <= 2; pass++) {
        ctx.note(`reconcile pass ${pass} started`);
        const code = await ctx.reconcile();
        ctx.note(`reconcile pass ${pass} exited with ${code}`);
      }
    },
  },
  heldWrite,
  readinessHammer,
  coldCrawl,
  outageRestart,
  stallShutdown,
  coldReaders,
  redisUnreachable,
  subscribeCrawl,
  clockAhead,
  clockBehind,
  failover,
  failoverLag,
  failoverLagAcks,
  sentinelFailover,
  clusterFailover,
  clusterFailoverLag,
  clusterFailoverLagAcks,
];
