// Runs reconcile passes on a cron schedule; with several workers, the one that
// takes the shared lease runs the pass and the others skip it.
import { Cron } from "croner";
import type { Logger } from "pino";
import type { Lease } from "../domain/ports.js";
import type { ReconcileSummary } from "./reconcile-pass.js";

export interface ReconcileSchedule {
  stop(): Promise<void>;
}

export function scheduleReconcile(options: {
  cron: string;
  /** Shared by every worker on the schedule. */
  lease: Lease;
  run: () => Promise<ReconcileSummary>;
  logger: Logger;
}): ReconcileSchedule {
  const { lease, logger } = options;
  let running: Promise<void> = Promise.resolve();
  const job = new Cron(options.cron, { protect: true }, () => {
    running = (async () => {
      // Held for at most an hour: a worker that dies mid-pass does not block the next night's.
      const token = await lease.acquire(3_600_000).catch((err: unknown) => {
        logger.error({ err }, "reconcile pass skipped: the lease could not be taken");
        return undefined;
      });
      if (token === undefined) return;
      if (token === null) {
        logger.info("reconcile pass skipped: another worker is running one");
        return;
      }
      try {
        logger.info("reconcile pass started");
        logger.info({ summary: await options.run() }, "reconcile pass finished");
      } catch (err) {
        logger.error({ err }, "reconcile pass failed");
      } finally {
        await lease.release(token).catch(() => {});
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
