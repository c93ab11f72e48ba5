// A running persistence pipeline on the test services, and ways to wait for it.
import { setTimeout as sleep } from "node:timers/promises";
import type { Config } from "../../src/config.js";
import { startPipeline, type PipelineHooks, type RunningPipeline } from "../../src/pipeline/pipeline.js";
import { createDatabase } from "../../src/stores/postgres/database.js";
import { createRabbitConnection } from "../../src/stores/rabbitmq/connection.js";
import { createRedisClient } from "../../src/stores/redis/client.js";
import { silentLogger } from "./env.js";

export interface TestPipeline extends RunningPipeline {
  /** Stops the pipeline and closes its clients. */
  stop(): Promise<void>;
}

export async function startTestPipeline(config: Config, hooks: PipelineHooks = {}): Promise<TestPipeline> {
  const db = createDatabase({ url: config.databaseUrl, poolSize: 4 });
  const [redis, relayRedis] = [createRedisClient({ url: config.redisUrl }), createRedisClient({ url: config.redisUrl })];
  for (const client of [redis, relayRedis]) {
    client.on("error", () => {});
    await client.connect();
  }
  const rabbit = createRabbitConnection(config.amqpUrl, silentLogger);
  const pipeline = await startPipeline(config, { db, redis, relayRedis, rabbit }, silentLogger, hooks);
  return {
    ...pipeline,
    async stop() {
      await pipeline.close();
      await rabbit.close();
      relayRedis.disconnect();
      redis.disconnect();
      await db.$disconnect();
    },
  };
}

/** Polls `check` until it returns true; fails with `describe()` after `timeoutMs`. */
export async function eventually(check: () => Promise<boolean>, timeoutMs: number, describe: () => Promise<string> | string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`not reached within ${timeoutMs / 1000} s: ${await describe()}`);
    await sleep(100);
  }
}
