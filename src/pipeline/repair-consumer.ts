// Applies reconcile repairs from RabbitMQ, a few at a time: they are few.
import type { Logger } from "pino";
import type { MessageBus, Subscription } from "../domain/ports/index.js";
import type { RepairService } from "../domain/repairs.js";
import type { PipelineMetrics } from "./metrics.js";

export function startRepairConsumer(options: { bus: MessageBus; repairs: RepairService; metrics: PipelineMetrics; logger: Logger }): Subscription {
  const { metrics, logger } = options;
  return options.bus.consumeRepairs({ concurrency: 10 }, async (delivery) => {
    if (delivery.kind === "invalid") {
      metrics.deadLettered.inc();
      logger.error({ reason: delivery.reason }, "repair dead-lettered");
      return { deadLetter: `invalid repair: ${delivery.reason}` };
    }
    // A repair that fails is valid: parked in the dead-letter queue it would leave the stores
    // apart for good, and requeued at once it would spin. It is applied again after the retry delay.
    try {
      await options.repairs.apply(delivery.value);
    } catch (err) {
      logger.error({ err, kind: delivery.value.kind }, "repair failed; it is applied again after the retry delay");
      return { retryLater: `repair failed: ${(err as Error).message}` };
    }
    logger.info({ kind: delivery.value.kind, target: `${delivery.value.target.type}:${delivery.value.target.id}` }, "repair applied");
    return "ack";
  });
}
