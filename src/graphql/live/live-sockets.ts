// The socket glue of subscriptions over WebSocket: upgrades on the HTTP server's
// /graphql path, keep-alive pings, and the bounds on what a client may hold.
//
// graphql-ws's server core speaks the protocol; the socket glue is written here
// rather than taken from its `useServer`, because that glue logs to the console,
// has no bound on connections, and waits forever on a client that stopped reading.
// Here a message not taken within LIVE_SEND_TIMEOUT_MS, or more than
// LIVE_MAX_BUFFERED_BYTES waiting for one client, drops that client: graphql-ws
// sends one message of a subscription at a time and waits for it to be written,
// so what one client can hold is at most a message per subscription, plus the
// newest counts of each of its posts (src/domain/live-counts.ts).
import type { IncomingMessage, Server } from "node:http";
import type { Duplex } from "node:stream";
import { CloseCode, handleProtocols, type Server as ProtocolServer } from "graphql-ws";
import type { Logger } from "pino";
import { WebSocketServer, type WebSocket } from "ws";
import { isSameHost } from "../origins.js";

export interface LiveSocketsOptions {
  readonly logger: Logger;
  /** The largest message a client may send, in bytes. */
  readonly maxPayloadBytes: number;
  readonly maxConnections: number;
  readonly sendTimeoutMs: number;
  readonly maxBufferedBytes: number;
  /** Milliseconds between pings; a connection that has not answered the last one by the next is cut. */
  readonly keepAliveMs: number;
  /** Whether a page at `origin` may connect (the Origin header browsers send); clients sending none, and pages of the host connected to, always may. */
  readonly allowsOrigin?: (origin: string) => boolean;
  /** Called for each client dropped for not taking its messages (metrics). */
  readonly onDroppedClient?: () => void;
}

export interface LiveServer {
  /** Open WebSocket connections. */
  connections(): number;
  /** Clients dropped for not taking their messages, since start. */
  droppedSlow(): number;
  /** Bytes written to connections that their clients have not taken yet (what slow clients hold in this process). */
  bufferedBytes(): number;
  /** Closes every connection with 1001 (going away), ending its subscriptions; stragglers are cut after a second. */
  close(): Promise<void>;
}

/** The WebSocket server, its bounds, and the count of clients dropped for slowness, which every connection adds to. */
interface Glue {
  readonly sockets: WebSocketServer;
  readonly options: LiveSocketsOptions;
  readonly dropped: { slow: number };
}

/** Drops a client that does not take its messages: its socket and whatever waits for it go at once. */
function dropSlow(glue: Glue, socket: WebSocket, why: string): void {
  if (socket.readyState === socket.CLOSED) return;
  glue.dropped.slow++;
  glue.options.onDroppedClient?.();
  glue.options.logger.info({ why, buffered: socket.bufferedAmount }, "a live client that did not take its messages was dropped");
  socket.terminate();
}

function send(glue: Glue, socket: WebSocket, data: string): Promise<void> {
  const { maxBufferedBytes, sendTimeoutMs } = glue.options;
  if (socket.readyState !== socket.OPEN) return Promise.resolve();
  if (socket.bufferedAmount > maxBufferedBytes) {
    dropSlow(glue, socket, `more than ${maxBufferedBytes} bytes waited`);
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      dropSlow(glue, socket, `a message waited more than ${sendTimeoutMs} ms`);
      resolve();
    }, sendTimeoutMs);
    socket.send(data, () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Pings the connection every `keepAliveMs`, cutting it when the last ping went unanswered; returns the timer. */
function keepAlive(glue: Glue, socket: WebSocket): NodeJS.Timeout {
  let awaitingPong = false;
  socket.on("pong", () => (awaitingPong = false));
  return setInterval(() => {
    if (awaitingPong) {
      // A dead peer, not a slow reader: cut without counting it as dropped for slowness.
      glue.options.logger.debug("a live client did not answer a ping; its connection is cut");
      socket.terminate();
      return;
    }
    awaitingPong = true;
    socket.ping();
  }, glue.options.keepAliveMs);
}

function serveConnection<E>(glue: Glue, protocol: ProtocolServer<E>, socket: WebSocket, extra: E): void {
  const { logger } = glue.options;
  socket.on("error", (err) => logger.debug({ err }, "live connection error"));
  const ping = keepAlive(glue, socket);
  const closed = protocol.opened(
    {
      protocol: socket.protocol,
      send: (data) => send(glue, socket, data),
      close: (code, reason) => socket.close(code, reason),
      onMessage: (handle) =>
        socket.on("message", (data: Buffer, isBinary: boolean) => {
          handle(isBinary ? "" : data.toString("utf8")).catch((err: unknown) => {
            // graphql-ws throws on messages a client may not send (next, error, connection_ack).
            logger.warn({ err }, "a live message could not be handled; the connection is closed");
            socket.close(CloseCode.BadRequest, "Bad request");
          });
        }),
    },
    extra,
  );
  socket.once("close", (code, reason) => {
    clearInterval(ping);
    closed(code, reason.toString("utf8")).catch((err: unknown) => logger.warn({ err }, "live connection did not close cleanly"));
  });
}

function refuseUpgrade(socket: Duplex, status: string): void {
  socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`, () => socket.destroy());
}

function routeUpgrades(http: Server, glue: Glue): void {
  const { sockets, options } = glue;
  http.on("upgrade", (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    // Node takes its own error listener off an upgraded socket: a client that resets it
    // before it is refused or handed to ws must not raise an unhandled error.
    socket.on("error", () => socket.destroy());
    const path = request.url?.split("?")[0];
    if (path !== "/graphql") return refuseUpgrade(socket, "404 Not Found");
    // Browsers send Origin with every WebSocket, their own host's pages too, and apply no CORS
    // to it: the server is the only check.
    const { origin, host } = request.headers;
    if (origin !== undefined && options.allowsOrigin && !options.allowsOrigin(origin) && !isSameHost(origin, host))
      return refuseUpgrade(socket, "403 Forbidden");
    if (sockets.clients.size >= options.maxConnections) return refuseUpgrade(socket, "503 Service Unavailable");
    sockets.handleUpgrade(request, socket, head, (ws) => sockets.emit("connection", ws, request));
  });
}

async function closeAll(sockets: WebSocketServer): Promise<void> {
  for (const socket of sockets.clients) socket.close(1001, "Going away");
  const cutAt = setTimeout(() => {
    for (const socket of sockets.clients) socket.terminate();
  }, 1_000);
  await new Promise<void>((resolve) => sockets.close(() => resolve()));
  await new Promise<void>((resolve) => {
    const wait = () => (sockets.clients.size === 0 ? resolve() : setTimeout(wait, 20));
    wait();
  });
  clearTimeout(cutAt);
}

/**
 * Hands WebSocket upgrades on /graphql of `http` to `protocol`, each connection with
 * the `extra` its hooks receive (`extraOf`).
 */
export function attachLiveSockets<E>(
  http: Server,
  protocol: ProtocolServer<E>,
  extraOf: (socket: WebSocket, request: IncomingMessage) => E,
  options: LiveSocketsOptions,
): LiveServer {
  const sockets = new WebSocketServer({ noServer: true, maxPayload: options.maxPayloadBytes, handleProtocols: (offered) => handleProtocols(offered) });
  const glue: Glue = { sockets, options, dropped: { slow: 0 } };
  sockets.on("connection", (socket: WebSocket, request: IncomingMessage) => serveConnection(glue, protocol, socket, extraOf(socket, request)));
  routeUpgrades(http, glue);
  return {
    connections: () => sockets.clients.size,
    droppedSlow: () => glue.dropped.slow,
    bufferedBytes: () => [...sockets.clients].reduce((sum, socket) => sum + socket.bufferedAmount, 0),
    close: () => closeAll(sockets),
  };
}
