// Runs reconcile passes on a cron schedule; with several workers, the one that
// takes the shared lease runs the pass and the others skip it.
import { Cron } from "croner";
import type { Logger } from "pino";
import type { Lease } from "../domain/ports.js";
import type { PipelineMetrics } from "./metrics.js";
import type { ReconcileSummary } from "./reconcile-pass.js";

export interface ReconcileSchedule {
  stop(): Promise<void>;
}

export function scheduleReconcile(options: {
  cron: string;
  /** Shared by every worker on the schedule. */
  lease: Lease;
  run: () => Promise<ReconcileSummary>;
  metrics?: Pick<PipelineMetrics, "reconcileInFlight" | "reconcileStuck" | "reconcileRebuiltBehind">;
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
        const summary = await options.run();
        options.metrics?.reconcileInFlight.set(summary.inFlight.count);
        options.metrics?.reconcileStuck.set(summary.stuck.count);
        options.metrics?.reconcileRebuiltBehind.inc(summary.rebuiltBehind.count);
        logger.info({ summary }, describeSummary(summary));
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

/** The pass's log line: what it could not compare is in the message, not only in the fields. */
export function describeSummary(summary: ReconcileSummary): string {
  const ids = (sample: readonly string[], count: number) => (count === 0 ? "" : ` (${sample.join(", ")}${count > sample.length ? ", …" : ""})`);
  return [
    `reconcile pass finished: ${summary.targetsChecked} targets checked, ${summary.repairsSent} repairs sent`,
    `${summary.inFlight.count} skipped as in flight${ids(summary.inFlight.sample, summary.inFlight.count)}`,
    `${summary.stuck.count} stuck${ids(summary.stuck.sample, summary.stuck.count)}`,
    `${summary.rebuiltBehind.count + summary.behindKept.count} lacking changes PostgreSQL has${ids([...summary.rebuiltBehind.sample, ...summary.behindKept.sample], summary.rebuiltBehind.count + summary.behindKept.count)}`,
  ].join("; ");
}
