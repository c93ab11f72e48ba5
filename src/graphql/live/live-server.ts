// Subscriptions over WebSocket: the graphql-ws protocol (graphql-transport-ws)
// on the HTTP server's own port and /graphql path.
//
// graphql-ws's server core speaks the protocol; the socket glue is written here
// rather than taken from its `useServer`, because that glue logs to the console,
// has no bound on connections, and waits forever on a client that stopped reading.
// Here a message not taken within LIVE_SEND_TIMEOUT_MS, or more than
// LIVE_MAX_BUFFERED_BYTES waiting for one client, drops that client: graphql-ws
// sends one message of a subscription at a time and waits for it to be written,
// so what one client can hold is at most a message per subscription, plus the
// newest counts of each of its posts (src/domain/live-counts.ts).
import { createHash } from "node:crypto";
import { performance } from "node:perf_hooks";
import type { IncomingMessage, Server } from "node:http";
import type { Duplex } from "node:stream";
import {
  createSourceEventStream,
  execute,
  getOperationAST,
  GraphQLError,
  Kind,
  OperationTypeNode,
  parse,
  validate,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type GraphQLFormattedError,
  type GraphQLSchema,
} from "graphql";
import { CloseCode, handleProtocols, makeServer, type Context as SocketContext } from "graphql-ws";
import type { Logger } from "pino";
import { WebSocketServer, type WebSocket } from "ws";
import type { Viewer } from "../../domain/identity.js";
import type { Services } from "../../domain/services.js";
import { ErrorCode, RequestErrorCode } from "../../errors.js";
import { createLoaders } from "../loaders.js";
import { mapIterator } from "./map-iterator.js";
import { notInSafelist } from "../persisted-queries.js";
import { isSameHost } from "../origins.js";
import type { Context } from "../context.js";
import { createRequestLimitsCheck, type RequestLimits } from "../limits/request-limits-plugin.js";
import { ApolloServerErrorCode } from "@apollo/server/errors";

export interface LiveServerOptions {
  readonly schema: GraphQLSchema;
  readonly services: Services;
  readonly logger: Logger;
  readonly limits: RequestLimits & { readonly bodyBytes: number };
  readonly formatError: (formatted: GraphQLFormattedError, error: unknown) => GraphQLFormattedError;
  readonly isUnavailable: (error: unknown) => boolean;
  readonly maxConnections: number;
  readonly maxSubscriptions: number;
  /** Subscribe messages one connection may send a second, in a burst of as many at most; default 10. */
  readonly subscribesPerSecond?: number;
  readonly sendTimeoutMs: number;
  readonly maxBufferedBytes: number;
  /** PERSISTED_QUERIES=safelist: whether a subscription's text is among the manifest's operations; default any. */
  readonly inSafelist?: (query: string) => boolean;
  /** How often a connection is pinged; one that does not answer within the same time is dropped. Default 12 s. */
  readonly keepAliveMs?: number;
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

interface Extra {
  readonly socket: WebSocket;
  readonly request: IncomingMessage;
  viewer: Viewer | null;
  /** Subscribe messages the connection may still send now, and when that was last worked out (ms, monotonic). */
  subscribes: { tokens: number; at: number };
}

/** RFC 6455 "try again later": the close code of a connection the service could not serve for a moment. */
const tryAgainLater = 1013;

function refusal(message: string, code: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code } });
}

/** The bearer token of a connection: `connectionParams.authorization` ("Bearer …") or `connectionParams.token`. */
function tokenOf(params: Readonly<Record<string, unknown>> | undefined): string | null | undefined {
  const header = params?.authorization ?? params?.Authorization;
  if (typeof header === "string") return /^Bearer\s+(\S+)$/i.exec(header)?.[1] ?? null;
  if (typeof params?.token === "string") return params.token;
  return undefined;
}

/**
 * What identifies the result of an operation for an event: the document, its
 * variables and the viewer. Kept per subscription's base context.
 */
const operationKeys = new WeakMap<Context, string>();

/**
 * Results per event and operation: a thousand subscribers of a hot post who sent
 * the same selection (and have no viewer, or the same) share one execution of it
 * per event rather than making a thousand. Events are shared objects per read
 * (resolvers/subscription.ts), and go once the last subscriber took them.
 */
const sharedResults = new WeakMap<object, Map<string, Promise<ExecutionResult>>>();

/**
 * Runs a subscription as graphql-js does, except that each event executes with
 * fresh loaders (a context lives as long as the subscription, and loaders kept
 * across events would answer every event with the first one's counts), and that
 * one execution per event serves every subscription with the same operation.
 */
async function subscribeWithFreshLoaders(args: ExecutionArgs): Promise<AsyncIterableIterator<ExecutionResult> | ExecutionResult> {
  const source = await createSourceEventStream(args);
  if (!(Symbol.asyncIterator in source)) return source;
  const base = args.contextValue as Context;
  const key = operationKeys.get(base);
  const events = source[Symbol.asyncIterator]();
  const executeFor = (event: unknown): Promise<ExecutionResult> => {
    const contextValue: Context = { ...base, loaders: createLoaders(base.services, base.viewer) };
    return Promise.resolve(execute({ ...args, rootValue: event, contextValue }));
  };
  return mapIterator(events, (event): Promise<ExecutionResult> => {
    if (key === undefined || typeof event !== "object" || event === null) return executeFor(event);
    let byOperation = sharedResults.get(event);
    if (!byOperation) sharedResults.set(event, (byOperation = new Map<string, Promise<ExecutionResult>>()));
    let result = byOperation.get(key);
    if (!result) byOperation.set(key, (result = executeFor(event)));
    return result;
  });
}

// eslint-disable-next-line max-lines-per-function -- graphql-ws's hooks share each connection's state and the server's bounds in one closure.
export function attachLiveServer(http: Server, options: LiveServerOptions): LiveServer {
  const { schema, services, logger, limits } = options;
  const keepAliveMs = options.keepAliveMs ?? 12_000;
  const subscribesPerSecond = options.subscribesPerSecond ?? 10;
  /** Takes one subscribe from a connection's bucket (refilled at `subscribesPerSecond`); false when empty. */
  const takeSubscribe = (bucket: Extra["subscribes"]): boolean => {
    const now = performance.now();
    bucket.tokens = Math.min(subscribesPerSecond, bucket.tokens + ((now - bucket.at) / 1000) * subscribesPerSecond);
    bucket.at = now;
    if (bucket.tokens < 1) return false;
    bucket.tokens--;
    return true;
  };
  const checkLimits = createRequestLimitsCheck(schema, limits);
  let droppedSlow = 0;
  const formatAll = (errors: readonly GraphQLError[]) => errors.map((error) => options.formatError(error.toJSON(), error));

  const protocol = makeServer<Record<string, unknown> | undefined, Extra>({
    schema,
    // The client has this long after connecting to send its connection_init.
    connectionInitWaitTimeout: 5_000,
    async onConnect(ctx: SocketContext<Record<string, unknown> | undefined, Extra>) {
      const token = tokenOf(ctx.connectionParams);
      if (token === undefined) return true;
      const problem = (message: string) => {
        ctx.extra.socket.close(CloseCode.Unauthorized, `UNAUTHENTICATED: ${message}`.slice(0, 120));
        return false;
      };
      if (token === null) return problem('connectionParams.authorization must be "Bearer <token>".');
      try {
        const authentication = await services.users.authenticate(token);
        if ("problem" in authentication) return problem(authentication.problem);
        ctx.extra.viewer = authentication.viewer;
        return true;
      } catch (error) {
        if (!options.isUnavailable(error)) throw error;
        ctx.extra.socket.close(tryAgainLater, "SERVICE_UNAVAILABLE: the service could not check the token in time; retry shortly.");
        return false;
      }
    },
    onSubscribe(ctx, _id, payload) {
      // Each subscribe reads its posts' counts (from PostgreSQL where Redis holds none) and listens to
      // them: a connection may send a bounded number a second, besides what its reads are charged.
      if (!takeSubscribe(ctx.extra.subscribes)) {
        return [
          new GraphQLError(`A connection may send at most ${subscribesPerSecond} subscribe messages a second; retry in a second.`, {
            extensions: { code: ErrorCode.RATE_LIMITED, retryAfterSeconds: 1 },
          }),
        ];
      }
      if (Object.keys(ctx.subscriptions).length > options.maxSubscriptions) {
        return [
          refusal(`A connection holds at most ${options.maxSubscriptions} subscriptions at once; complete one first.`, RequestErrorCode.TOO_MANY_SUBSCRIPTIONS),
        ];
      }
      if (options.inSafelist && !options.inSafelist(payload.query)) return [refusal(notInSafelist, RequestErrorCode.OPERATION_NOT_IN_SAFELIST)];
      let document: DocumentNode;
      try {
        document = parse(payload.query, { maxTokens: 5_000 });
      } catch (error) {
        return [refusal((error as Error).message, ApolloServerErrorCode.GRAPHQL_PARSE_FAILED)];
      }
      const invalid = validate(schema, document);
      if (invalid.length > 0) return invalid.map((error) => refusal(error.message, ApolloServerErrorCode.GRAPHQL_VALIDATION_FAILED));
      const operation = getOperationAST(document, payload.operationName);
      if (!operation) return [refusal("Name one operation of the document in operationName.", ApolloServerErrorCode.OPERATION_RESOLUTION_FAILURE)];
      if (operation.operation !== OperationTypeNode.SUBSCRIPTION) {
        return [refusal("Only subscriptions are served over WebSocket; send queries and mutations over HTTP.", RequestErrorCode.OPERATION_NOT_SUPPORTED)];
      }
      // graphql-js validates such a document, then fails to run it for want of a root field.
      if (operation.selectionSet.selections.some((selection) => (selection.directives?.length ?? 0) > 0 || selection.kind !== Kind.FIELD)) {
        return [
          refusal("A subscription's root field is asked for directly: no fragments or directives on it.", ApolloServerErrorCode.GRAPHQL_VALIDATION_FAILED),
        ];
      }
      const variables = payload.variables ?? {};
      try {
        checkLimits({ document, operation, operationName: payload.operationName ?? undefined, variables });
      } catch (error) {
        if (error instanceof GraphQLError) return [error];
        throw error;
      }
      const viewer = ctx.extra.viewer ?? null;
      const contextValue: Context = {
        viewer,
        tokenProblem: null,
        clientIp: ctx.extra.request.socket.remoteAddress ?? "unknown",
        loaders: createLoaders(services, viewer),
        services,
        charged: { standing: null },
      };
      // A digest: the document may be 100 KB, and is held for as long as the subscription.
      const key = JSON.stringify([payload.query, payload.operationName ?? null, variables, viewer?.userId.toString() ?? null]);
      operationKeys.set(contextValue, createHash("sha256").update(key).digest("base64url"));
      return { schema, document, operationName: payload.operationName ?? null, variableValues: variables, contextValue };
    },
    subscribe: subscribeWithFreshLoaders,
    onNext: (_ctx, _id, _payload, _args, result) => (result.errors ? { ...result, errors: formatAll(result.errors) } : undefined),
    onError: (_ctx, _id, _payload, errors) => formatAll(errors),
  });

  const sockets = new WebSocketServer({ noServer: true, maxPayload: limits.bodyBytes, handleProtocols: (offered) => handleProtocols(offered) });

  /** Drops a client that does not take its messages: its socket and whatever waits for it go at once. */
  function dropSlow(socket: WebSocket, why: string): void {
    if (socket.readyState === socket.CLOSED) return;
    droppedSlow++;
    options.onDroppedClient?.();
    logger.info({ why, buffered: socket.bufferedAmount }, "a live client that did not take its messages was dropped");
    socket.terminate();
  }

  function send(socket: WebSocket, data: string): Promise<void> {
    if (socket.readyState !== socket.OPEN) return Promise.resolve();
    if (socket.bufferedAmount > options.maxBufferedBytes) {
      dropSlow(socket, `more than ${options.maxBufferedBytes} bytes waited`);
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        dropSlow(socket, `a message waited more than ${options.sendTimeoutMs} ms`);
        resolve();
      }, options.sendTimeoutMs);
      socket.send(data, () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  sockets.on("connection", (socket: WebSocket, request: IncomingMessage) => {
    const extra: Extra = { socket, request, viewer: null, subscribes: { tokens: subscribesPerSecond, at: performance.now() } };
    socket.on("error", (err) => logger.debug({ err }, "live connection error"));
    let awaitingPong = false;
    socket.on("pong", () => (awaitingPong = false));
    const ping = setInterval(() => {
      if (awaitingPong) {
        // A dead peer, not a slow reader: cut without counting it as dropped for slowness.
        logger.debug("a live client did not answer a ping; its connection is cut");
        socket.terminate();
        return;
      }
      awaitingPong = true;
      socket.ping();
    }, keepAliveMs);
    const closed = protocol.opened(
      {
        protocol: socket.protocol,
        send: (data) => send(socket, data),
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
  });

  const refuseUpgrade = (socket: Duplex, status: string) => {
    socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`, () => socket.destroy());
  };
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

  return {
    connections: () => sockets.clients.size,
    droppedSlow: () => droppedSlow,
    bufferedBytes: () => [...sockets.clients].reduce((sum, socket) => sum + socket.bufferedAmount, 0),
    async close() {
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
    },
  };
}
