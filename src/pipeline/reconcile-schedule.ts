// Runs reconcile passes on a cron schedule; with several workers, the one that
// takes the Redis lock runs the pass and the others skip it.
import { randomUUID } from "node:crypto";
import { Cron } from "croner";
import type { Logger } from "pino";
import type { RedisClient } from "../stores/redis/client.js";
import type { ReconcileSummary } from "./reconcile.js";

export interface ReconcileSchedule {
  stop(): Promise<void>;
}

export function scheduleReconcile(options: {
  cron: string;
  redis: RedisClient;
  lockKey: string;
  run: () => Promise<ReconcileSummary>;
  logger: Logger;
}): ReconcileSchedule {
  const { redis, lockKey, logger } = options;
  let running: Promise<void> = Promise.resolve();
  const job = new Cron(options.cron, { protect: true }, () => {
    running = (async () => {
      const token = randomUUID();
      // Held for at most an hour: a worker that dies mid-pass does not block the next night's.
      if ((await redis.set(lockKey, token, "PX", 3_600_000, "NX")) !== "OK") {
        logger.info("reconcile pass skipped: another worker is running one");
        return;
      }
      try {
        logger.info("reconcile pass started");
        logger.info({ summary: await options.run() }, "reconcile pass finished");
      } catch (err) {
        logger.error({ err }, "reconcile pass failed");
      } finally {
        await redis.releaseLock(lockKey, token).catch(() => {});
      }
    })();
  });
  logger.info({ cron: options.cron, next: job.nextRun()?.toISOString() }, "reconcile scheduled");
  return {
    async stop() {
      job.stop();
      await running;
    },
  };
}
