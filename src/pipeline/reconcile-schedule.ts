// Runs reconcile passes on a cron schedule; with several workers, each tick runs
// once. The worker that claims the tick runs its pass and the others skip it: a
// lease alone would let a worker whose clock runs late start a second pass once a
// short first one released it. The lease still keeps passes from ever running at once
// (a pass that outlasts the interval to the next tick).
import { Cron } from "croner";
import type { Logger } from "pino";
import type { Lease, TickClaims } from "../domain/ports/index.js";
import type { PipelineMetrics } from "./metrics.js";
import type { ReconcileSummary } from "./reconcile-pass.js";

export interface ReconcileSchedule {
  stop(): Promise<void>;
}

export function scheduleReconcile(options: {
  cron: string;
  /** Shared by every worker on the schedule. */
  lease: Lease;
  /** Claims of ticks, shared by every worker on the schedule: true for the first to claim a tick. */
  ticks: TickClaims;
  run: () => Promise<ReconcileSummary>;
  metrics?: Pick<PipelineMetrics, "reconcileInFlight" | "reconcileStuck" | "reconcileRebuiltBehind" | "reconcileDifferences" | "reconcilePasses">;
  logger: Logger;
}): ReconcileSchedule {
  const { lease, logger } = options;
  // Ticks in hand: a pass may outlast the interval, and stop() waits for it as well as for the ticks after it.
  const running = new Set<Promise<void>>();
  // The time the next tick is due, as the pattern says (not when its timer fires): the same on every
  // worker whose clock is in the same time zone (the pattern is read in the process's own, TZ).
  let due: Date | null = null;
  const job = new Cron(options.cron, (self: Cron) => {
    const tick = due;
    due = self.nextRun();
    if (tick === null) return;
    const work = runTick(tick);
    running.add(work);
    void work.finally(() => running.delete(work));
  });

  async function runTick(tick: Date): Promise<void> {
    const claimed = await options.ticks.claim(tick).catch((err: unknown) => {
      logger.error({ err, tick }, "reconcile pass skipped: its tick could not be claimed");
      return null;
    });
    if (claimed === null) return;
    if (!claimed) {
      logger.info({ tick }, "reconcile pass skipped: another worker took this tick");
      return;
    }
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
      logger.info({ tick }, "reconcile pass started");
      const summary = await options.run();
      options.metrics?.reconcileInFlight.set(summary.inFlight.count);
      options.metrics?.reconcileStuck.set(summary.stuck.count);
      options.metrics?.reconcileRebuiltBehind.inc(summary.rebuiltBehind.count);
      for (const [kind, found] of Object.entries(summary.differences)) options.metrics?.reconcileDifferences.inc({ kind }, found);
      options.metrics?.reconcilePasses.inc({ outcome: "finished" });
      logger.info({ summary }, describeSummary(summary));
    } catch (err) {
      options.metrics?.reconcilePasses.inc({ outcome: "failed" });
      logger.error({ err }, "reconcile pass failed");
    } finally {
      await lease.release(token).catch(() => {});
    }
  }
  due = job.nextRun();
  logger.info({ cron: options.cron, next: due?.toISOString() }, "reconcile scheduled");
  return {
    async stop() {
      job.stop();
      await Promise.all(running);
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
