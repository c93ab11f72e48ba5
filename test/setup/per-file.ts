// After each test file: the RabbitMQ queues and exchanges its configurations
// declared are deleted. Every quorum queue left in the suite's vhost is
// recovered whenever RabbitMQ restarts; a few hundred kept the broker busy for
// a minute afterwards, and whatever ran next failed to connect.
import { setTimeout as sleep } from "node:timers/promises";
import { Connection } from "rabbitmq-client";
import { afterAll, inject } from "vitest";
import type { Config } from "../../src/config.js";
import { createTopology } from "../../src/stores/rabbitmq/topology.js";
import { testConfigs } from "../support/env.js";

function queuesOf(config: Config): { queues: string[]; exchange: string } {
  const topology = createTopology({ prefix: config.rabbitmq.prefix, persistQueues: config.persist.queues, queueType: config.rabbitmq.queueType });
  const queues = [
    ...topology.persistQueues,
    topology.deadQueue,
    topology.repairQueue.queueOptions.queue,
    topology.changeRetryQueue.queue,
    topology.retriedChangesQueue.queueOptions.queue,
    topology.repairRetryQueue.queue,
    topology.partitioningMarker.queue,
  ];
  return { queues: queues.filter((q): q is string => q !== undefined), exchange: topology.exchange };
}

afterAll(async () => {
  const configs = testConfigs.splice(0);
  if (configs.length === 0) return;
  // The suite's broker, whatever address a configuration pointed at (a proxy, a closed port).
  const rabbit = new Connection({ url: inject("amqpUrl"), retryLow: 100, retryHigh: 500 });
  rabbit.on("error", () => {});
  try {
    // A broker that does not answer is not waited for: its queues go with the vhost at the end.
    const connected = await Promise.race([
      rabbit.onConnect(5_000).then(
        () => true,
        () => false,
      ),
      sleep(5_000).then(() => false),
    ]);
    if (!connected) return;
    const seen = new Set<string>();
    for (const config of configs) {
      const { queues, exchange } = queuesOf(config);
      for (const queue of [...queues, exchange]) {
        if (seen.has(queue)) continue;
        seen.add(queue);
        if (queue === exchange) await rabbit.exchangeDelete({ exchange });
        else await rabbit.queueDelete({ queue });
      }
    }
  } finally {
    await rabbit.close();
  }
});
