// Applies reconcile repairs from RabbitMQ, a few at a time: they are few.
import type { Logger } from "pino";
import type { MessageBus, Subscription } from "../domain/ports.js";
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
    // A failure throws: the message is requeued and retried, then dead-lettered by the broker's delivery limit.
    await options.repairs.apply(delivery.value);
    logger.info({ kind: delivery.value.kind, target: `${delivery.value.target.type}:${delivery.value.target.id}` }, "repair applied");
    return "ack";
  });
}
