// A TCP proxy in front of a real server, for faults a client cannot tell from a
// network's: connections reset, replies lost, a server that stops answering.
import net from "node:net";

export interface TcpProxy {
  readonly port: number;
  readonly url: string;
  /** From now on the server's replies are dropped; requests still reach it. */
  dropReplies(): void;
  /** Nothing passes either way until `resume` (held bytes pass then). */
  stall(): void;
  resume(): void;
  /** Resets every open connection (TCP RST) and forwards normally again. */
  reset(): void;
  /** Resets every open connection and resets new ones at once, as an unreachable server would, until `resume`. */
  refuse(): void;
  /** Connections accepted so far. */
  readonly accepted: number;
  close(): Promise<void>;
}

type Mode = "forward" | "drop-replies" | "stall" | "refuse";

export async function startTcpProxy(target: { host: string; port: number }, scheme = "redis"): Promise<TcpProxy> {
  let mode: Mode = "forward";
  let accepted = 0;
  const pairs = new Set<{ client: net.Socket; server: net.Socket }>();

  const server = net.createServer((client) => {
    accepted++;
    if (mode === "refuse") {
      client.on("error", () => {}).resetAndDestroy();
      return;
    }
    const upstream = net.connect(target.port, target.host);
    const pair = { client, server: upstream };
    pairs.add(pair);
    if (mode === "stall") {
      client.pause();
      upstream.pause();
    }
    client.on("data", (chunk) => upstream.write(chunk));
    upstream.on("data", (chunk) => {
      if (mode !== "drop-replies") client.write(chunk);
    });
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  const resetAll = () => {
    for (const pair of [...pairs]) {
      pairs.delete(pair);
      pair.client.resetAndDestroy();
      pair.server.destroy();
    }
  };
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;

  return {
    port,
    url: `${scheme}://127.0.0.1:${port}`,
    get accepted() {
      return accepted;
    },
    dropReplies() {
      mode = "drop-replies";
    },
    stall() {
      mode = "stall";
      for (const { client, server: upstream } of pairs) {
        client.pause();
        upstream.pause();
      }
    },
    resume() {
      mode = "forward";
      for (const { client, server: upstream } of pairs) {
        client.resume();
        upstream.resume();
      }
    },
    reset() {
      mode = "forward";
      resetAll();
    },
    refuse() {
      mode = "refuse";
      resetAll();
    },
    async close() {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.server.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
