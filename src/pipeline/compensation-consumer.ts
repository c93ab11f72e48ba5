// Applies reconcile repairs from RabbitMQ, one message at a time: they are few.
import type { Logger } from "pino";
import { ConsumerStatus, type Connection, type Consumer } from "rabbitmq-client";
import { parseCompensation } from "../domain/reconcile.js";
import type { RepairService } from "../domain/repairs.js";
import type { EventPublisher } from "../stores/rabbitmq/publisher.js";
import type { Topology } from "../stores/rabbitmq/topology.js";
import type { PipelineMetrics } from "./metrics.js";

export function startCompensationConsumer(options: {
  connection: Connection;
  topology: Topology;
  publisher: EventPublisher;
  repairs: RepairService;
  metrics: PipelineMetrics;
  logger: Logger;
}): Consumer {
  const { topology, logger } = options;
  const consumer = options.connection.createConsumer(
    {
      queue: topology.compensateQueue.queueOptions.queue,
      queueOptions: topology.compensateQueue.queueOptions,
      queueBindings: topology.compensateQueue.queueBindings,
      exchanges: topology.exchanges,
      qos: { prefetchCount: 50 },
      concurrency: 10,
      requeue: true,
    },
    async (message) => {
      const parsed = parseCompensation(message.body);
      if ("invalid" in parsed) {
        await options.publisher.deadLetter(message.body, `invalid compensation: ${parsed.invalid}`, topology.compensateRoutingKey);
        options.metrics.deadLettered.inc();
        logger.error({ reason: parsed.invalid }, "compensation dead-lettered");
        return ConsumerStatus.ACK;
      }
      // A failure throws: the message is requeued and retried, then dead-lettered by the broker's delivery limit.
      await options.repairs.apply(parsed.compensation);
      logger.info({ kind: parsed.compensation.kind, target: `${parsed.compensation.target.type}:${parsed.compensation.target.id}` }, "repair applied");
      return ConsumerStatus.ACK;
    },
  );
  consumer.on("error", (err) => logger.warn({ err }, "compensation consumer problem"));
  return consumer;
}
