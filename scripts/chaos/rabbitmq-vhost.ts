// A RabbitMQ vhost of the fault suite's own on the shared broker: its queues
// vanish with it, and connection loss is injected by a proxy, never by
// touching the broker.
import { execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);
const rabbitmqctl = async (...args: string[]) => (await run("rabbitmqctl", args, { timeout: 30_000 })).stdout;

export interface QueueDepth {
  readonly name: string;
  /** Ready and unacknowledged messages. */
  readonly messages: number;
}

export interface RabbitVhost {
  readonly name: string;
  /** The AMQP URL of this vhost, on `host:port` (a proxy's, or the broker's). */
  urlVia(host: string, port: number): string;
  queues(): Promise<QueueDepth[]>;
  remove(): Promise<void>;
}

export async function createRabbitVhost(brokerUrl: string, name: string): Promise<RabbitVhost> {
  await rabbitmqctl("delete_vhost", name).catch(() => undefined);
  await rabbitmqctl("add_vhost", name);
  await rabbitmqctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*");
  const orphaned = () => {
    try {
      execFileSync("rabbitmqctl", ["delete_vhost", name], { stdio: "ignore", timeout: 30_000 });
    } catch {
      // The broker is gone or the vhost already is.
    }
  };
  process.on("exit", orphaned);
  return {
    name,
    urlVia(host, port) {
      const url = new URL(brokerUrl);
      url.hostname = host;
      url.port = String(port);
      url.pathname = `/${encodeURIComponent(name)}`;
      return url.toString();
    },
    async queues() {
      const out = await rabbitmqctl("list_queues", "-p", name, "--quiet", "--no-table-headers", "name", "messages");
      return out
        .split("\n")
        .map((line) => line.trim().split(/\s+/))
        .filter((fields) => fields.length === 2 && /^\d+$/.test(fields[1] as string))
        .map(([queue, messages]) => ({ name: queue as string, messages: Number(messages) }));
    },
    async remove() {
      process.off("exit", orphaned);
      await rabbitmqctl("delete_vhost", name).catch(() => undefined);
    },
  };
}
