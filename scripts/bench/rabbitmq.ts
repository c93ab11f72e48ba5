// A RabbitMQ vhost of the bench's own, emptied at every run, so no message of
// an earlier (perhaps interrupted) run reaches this run's database.
import { execFileSync } from "node:child_process";

const rabbitmqctl = (...args: string[]) => execFileSync("rabbitmqctl", args, { stdio: "pipe" });

/** Deletes and recreates `vhost`; returns `amqpUrl` pointed at it. */
export function freshVhost(amqpUrl: string, vhost: string): string {
  try {
    rabbitmqctl("delete_vhost", vhost);
  } catch {
    // Not there yet.
  }
  rabbitmqctl("add_vhost", vhost);
  rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*");
  const url = new URL(amqpUrl);
  url.pathname = `/${vhost}`;
  return url.toString();
}
