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

/** What the proxy's steps share: where new connections go, how bytes are treated now, and the connections open. */
interface ProxyState {
  target: { host: string; port: number };
  mode: Mode;
  accepted: number;
  readonly pairs: Set<Pair>;
  readonly held: { toServer: number; toClient: number };
}

/** Passes bytes each way as the mode says, and closes the pair when either side goes. */
function relay(state: ProxyState, pair: Pair): void {
  const { client, server: upstream } = pair;
  client.on("data", (chunk: Buffer) => {
    if (state.mode !== "hold") return void upstream.write(chunk);
    pair.toServer.push(chunk);
    state.held.toServer += chunk.length;
  });
  upstream.on("data", (chunk: Buffer) => {
    if (state.mode === "hold") {
      pair.toClient.push(chunk);
      state.held.toClient += chunk.length;
    } else if (state.mode !== "drop-replies") client.write(chunk);
  });
  const end = () => {
    state.pairs.delete(pair);
    client.destroy();
    upstream.destroy();
  };
  const clientEnd = () => {
    // Held requests stay on their way to the server; `resume` delivers them.
    if (state.mode === "hold" && state.pairs.has(pair) && pair.toServer.length > 0) {
      pair.clientGone = true;
      client.destroy();
      return;
    }
    end();
  };
  client.on("error", clientEnd).on("close", clientEnd);
  upstream.on("error", end).on("close", end);
}

function accept(state: ProxyState, client: net.Socket): void {
  state.accepted++;
  if (state.mode === "refuse") {
    client.on("error", () => {}).resetAndDestroy();
    return;
  }
  const upstream = net.connect(state.target.port, state.target.host);
  const pair: Pair = { client, server: upstream, toServer: [], toClient: [], clientGone: false };
  state.pairs.add(pair);
  if (state.mode === "stall") {
    client.pause();
    upstream.pause();
  }
  relay(state, pair);
}

function resetAll(state: ProxyState): void {
  for (const pair of [...state.pairs]) {
    state.pairs.delete(pair);
    if (!pair.client.destroyed) pair.client.resetAndDestroy();
    pair.server.destroy();
  }
}

function resumeAll(state: ProxyState): void {
  state.mode = "forward";
  for (const pair of [...state.pairs]) {
    const { client, server: upstream } = pair;
    for (const chunk of pair.toServer.splice(0)) upstream.write(chunk);
    if (pair.clientGone) {
      state.pairs.delete(pair);
      upstream.end();
      continue;
    }
    for (const chunk of pair.toClient.splice(0)) client.write(chunk);
    client.resume();
    upstream.resume();
  }
}

export async function startTcpProxy(initial: { host: string; port: number }, scheme = "redis"): Promise<TcpProxy> {
  const state: ProxyState = { target: initial, mode: "forward", accepted: 0, pairs: new Set(), held: { toServer: 0, toClient: 0 } };
  const server = net.createServer((client) => accept(state, client));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;

  return {
    port,
    url: `${scheme}://127.0.0.1:${port}`,
    get accepted() {
      return state.accepted;
    },
    dropReplies() {
      state.mode = "drop-replies";
    },
    stall() {
      state.mode = "stall";
      for (const { client, server: upstream } of state.pairs) {
        client.pause();
        upstream.pause();
      }
    },
    hold() {
      state.mode = "hold";
    },
    held: state.held,
    resume() {
      resumeAll(state);
    },
    reset() {
      state.mode = "forward";
      resetAll(state);
    },
    refuse() {
      state.mode = "refuse";
      resetAll(state);
    },
    retarget(port) {
      state.target = { ...state.target, port };
      state.mode = "forward";
      resetAll(state);
    },
    async close() {
      for (const pair of state.pairs) {
        pair.client.destroy();
        pair.server.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
