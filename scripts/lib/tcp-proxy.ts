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
  /**
   * Like `stall`, but the proxy takes and keeps every byte (counted in `held`), and a
   * connection its client closes meanwhile stays open towards the server: `resume`
   * delivers what it held even then, as a network delivers packets late to a server
   * whose client gave up. `reset` or `refuse` drops what it held instead.
   */
  hold(): void;
  /** Bytes taken while holding, each way, since the proxy started. */
  readonly held: { readonly toServer: number; readonly toClient: number };
  resume(): void;
  /** Resets every open connection (TCP RST) and forwards normally again. */
  reset(): void;
  /** Resets every open connection and resets new ones at once, as an unreachable server would, until `resume`. */
  refuse(): void;
  /** Resets every open connection and sends new ones to the server on `port` of the same host: a failover behind one address. */
  retarget(port: number): void;
  /** Connections accepted so far. */
  readonly accepted: number;
  close(): Promise<void>;
}

type Mode = "forward" | "drop-replies" | "stall" | "hold" | "refuse";

interface Pair {
  readonly client: net.Socket;
  readonly server: net.Socket;
  /** Bytes taken while holding, not yet passed on. */
  readonly toServer: Buffer[];
  readonly toClient: Buffer[];
  /** The client closed while bytes for the server were held. */
  clientGone: boolean;
}

export async function startTcpProxy(initial: { host: string; port: number }, scheme = "redis"): Promise<TcpProxy> {
  let target = initial;
  let mode: Mode = "forward";
  let accepted = 0;
  const pairs = new Set<Pair>();
  const held = { toServer: 0, toClient: 0 };

  const server = net.createServer((client) => {
    accepted++;
    if (mode === "refuse") {
      client.on("error", () => {}).resetAndDestroy();
      return;
    }
    const upstream = net.connect(target.port, target.host);
    const pair: Pair = { client, server: upstream, toServer: [], toClient: [], clientGone: false };
    pairs.add(pair);
    if (mode === "stall") {
      client.pause();
      upstream.pause();
    }
    client.on("data", (chunk: Buffer) => {
      if (mode !== "hold") return void upstream.write(chunk);
      pair.toServer.push(chunk);
      held.toServer += chunk.length;
    });
    upstream.on("data", (chunk: Buffer) => {
      if (mode === "hold") {
        pair.toClient.push(chunk);
        held.toClient += chunk.length;
      } else if (mode !== "drop-replies") client.write(chunk);
    });
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    const clientEnd = () => {
      // Held requests stay on their way to the server; `resume` delivers them.
      if (mode === "hold" && pairs.has(pair) && pair.toServer.length > 0) {
        pair.clientGone = true;
        client.destroy();
        return;
      }
      end();
    };
    client.on("error", clientEnd).on("close", clientEnd);
    upstream.on("error", end).on("close", end);
  });
  const resetAll = () => {
    for (const pair of [...pairs]) {
      pairs.delete(pair);
      if (!pair.client.destroyed) pair.client.resetAndDestroy();
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
    hold() {
      mode = "hold";
    },
    held,
    resume() {
      mode = "forward";
      for (const pair of [...pairs]) {
        const { client, server: upstream } = pair;
        for (const chunk of pair.toServer.splice(0)) upstream.write(chunk);
        if (pair.clientGone) {
          pairs.delete(pair);
          upstream.end();
          continue;
        }
        for (const chunk of pair.toClient.splice(0)) client.write(chunk);
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
    retarget(port) {
      target = { ...target, port };
      mode = "forward";
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
