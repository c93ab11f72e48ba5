import { Connection } from "rabbitmq-client";
import type { Logger } from "pino";

/** A connection that reconnects by itself; problems are logged, never thrown. */
export function createRabbitConnection(url: string, logger: Logger): Connection {
  const connection = new Connection({ url, connectionName: "like-counter-service", retryLow: 200, retryHigh: 5_000 });
  connection.on("error", (err) => logger.warn({ err }, "RabbitMQ connection problem; reconnecting"));
  connection.on("connection", () => logger.info("RabbitMQ connected"));
  return connection;
}
