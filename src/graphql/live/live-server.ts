// Subscriptions over WebSocket: the graphql-ws protocol (graphql-transport-ws)
// on the HTTP server's own port and /graphql path. The hooks of graphql-ws's
// server core are here; the socket glue and its bounds are in live-sockets.ts.
import { createHash } from "node:crypto";
import { performance } from "node:perf_hooks";
import type { IncomingMessage, Server } from "node:http";
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
  type OperationDefinitionNode,
} from "graphql";
import { CloseCode, makeServer, type Context as SocketContext, type Server as ProtocolServer, type SubscribePayload } from "graphql-ws";
import type { WebSocket } from "ws";
import type { Viewer } from "../../domain/identity.js";
import type { Services } from "../../domain/services.js";
import { ErrorCode, RequestErrorCode } from "../../errors.js";
import { createLoaders } from "../loaders.js";
import { mapIterator } from "./map-iterator.js";
import { attachLiveSockets, type LiveServer, type LiveSocketsOptions } from "./live-sockets.js";
import { notInSafelist } from "../persisted-queries.js";
import type { Context } from "../context.js";
import { createRequestLimitsCheck, type RequestLimits } from "../limits/request-limits-plugin.js";
import { ApolloServerErrorCode } from "@apollo/server/errors";

export type { LiveServer };

export interface LiveServerOptions extends Omit<LiveSocketsOptions, "maxPayloadBytes" | "keepAliveMs"> {
  readonly schema: GraphQLSchema;
  readonly services: Services;
  readonly limits: RequestLimits & { readonly bodyBytes: number };
  readonly formatError: (formatted: GraphQLFormattedError, error: unknown) => GraphQLFormattedError;
  readonly isUnavailable: (error: unknown) => boolean;
  readonly maxSubscriptions: number;
  /** Subscribe messages one connection may send a second, in a burst of as many at most; default 10. */
  readonly subscribesPerSecond?: number;
  /** PERSISTED_QUERIES=safelist: whether a subscription's text is among the manifest's operations; default any. */
  readonly inSafelist?: (query: string) => boolean;
  /** How often a connection is pinged; one that does not answer within the same time is dropped. Default 12 s. */
  readonly keepAliveMs?: number;
}

type Params = Record<string, unknown> | undefined;

interface Extra {
  readonly socket: WebSocket;
  readonly request: IncomingMessage;
  viewer: Viewer | null;
  /** Subscribe messages the connection may still send now, and when that was last worked out (ms, monotonic). */
  subscribes: { tokens: number; at: number };
}

/** What every connection's hooks share: the server's options, its subscribe rate, and its compiled limits check. */
interface Hooks {
  readonly options: LiveServerOptions;
  readonly subscribesPerSecond: number;
  readonly checkLimits: ReturnType<typeof createRequestLimitsCheck>;
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

/** Takes one subscribe from a connection's bucket (refilled at `perSecond`); false when empty. */
function takeSubscribe(bucket: Extra["subscribes"], perSecond: number): boolean {
  const now = performance.now();
  bucket.tokens = Math.min(perSecond, bucket.tokens + ((now - bucket.at) / 1000) * perSecond);
  bucket.at = now;
  if (bucket.tokens < 1) return false;
  bucket.tokens--;
  return true;
}

/** Whether the connection may be served, and as whom: true serves it, false after closing it. */
async function authenticateConnection(hooks: Hooks, ctx: SocketContext<Params, Extra>): Promise<boolean> {
  const token = tokenOf(ctx.connectionParams);
  if (token === undefined) return true;
  const problem = (message: string) => {
    ctx.extra.socket.close(CloseCode.Unauthorized, `UNAUTHENTICATED: ${message}`.slice(0, 120));
    return false;
  };
  if (token === null) return problem('connectionParams.authorization must be "Bearer <token>".');
  try {
    const authentication = await hooks.options.services.users.authenticate(token);
    if ("problem" in authentication) return problem(authentication.problem);
    ctx.extra.viewer = authentication.viewer;
    return true;
  } catch (error) {
    if (!hooks.options.isUnavailable(error)) throw error;
    ctx.extra.socket.close(tryAgainLater, "SERVICE_UNAVAILABLE: the service could not check the token in time; retry shortly.");
    return false;
  }
}

/** The refusal of a subscribe the connection's bounds or the safelist do not admit, or null. */
function refuseBeyondBounds(hooks: Hooks, ctx: SocketContext<Params, Extra>, query: string): GraphQLError[] | null {
  const { options, subscribesPerSecond } = hooks;
  // Each subscribe reads its posts' counts (from PostgreSQL where Redis holds none) and listens to
  // them: a connection may send a bounded number a second, besides what its reads are charged.
  if (!takeSubscribe(ctx.extra.subscribes, subscribesPerSecond)) {
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
  if (options.inSafelist && !options.inSafelist(query)) return [refusal(notInSafelist, RequestErrorCode.OPERATION_NOT_IN_SAFELIST)];
  return null;
}

/** The document and its one subscription operation, or why the payload names none that can run. */
function parseSubscription(
  schema: GraphQLSchema,
  payload: SubscribePayload,
): { readonly document: DocumentNode; readonly operation: OperationDefinitionNode } | GraphQLError[] {
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
    return [refusal("A subscription's root field is asked for directly: no fragments or directives on it.", ApolloServerErrorCode.GRAPHQL_VALIDATION_FAILED)];
  }
  return { document, operation };
}

/** The context a subscription lives with, keyed for sharing its results per event. */
function subscriptionContext(services: Services, extra: Extra, payload: SubscribePayload, variables: Record<string, unknown>): Context {
  const viewer = extra.viewer ?? null;
  const contextValue: Context = {
    viewer,
    tokenProblem: null,
    clientIp: extra.request.socket.remoteAddress ?? "unknown",
    loaders: createLoaders(services, viewer),
    services,
    charged: { standing: null },
  };
  // A digest: the document may be 100 KB, and is held for as long as the subscription.
  const key = JSON.stringify([payload.query, payload.operationName ?? null, variables, viewer?.userId.toString() ?? null]);
  operationKeys.set(contextValue, createHash("sha256").update(key).digest("base64url"));
  return contextValue;
}

function startSubscription(hooks: Hooks, ctx: SocketContext<Params, Extra>, payload: SubscribePayload): ExecutionArgs | GraphQLError[] {
  const refused = refuseBeyondBounds(hooks, ctx, payload.query);
  if (refused) return refused;
  const { schema, services } = hooks.options;
  const parsed = parseSubscription(schema, payload);
  if (Array.isArray(parsed)) return parsed;
  const { document, operation } = parsed;
  const variables = payload.variables ?? {};
  try {
    hooks.checkLimits({ document, operation, operationName: payload.operationName ?? undefined, variables });
  } catch (error) {
    if (error instanceof GraphQLError) return [error];
    throw error;
  }
  const contextValue = subscriptionContext(services, ctx.extra, payload, variables);
  return { schema, document, operationName: payload.operationName ?? null, variableValues: variables, contextValue };
}

function createProtocol(hooks: Hooks): ProtocolServer<Extra> {
  const formatAll = (errors: readonly GraphQLError[]) => errors.map((error) => hooks.options.formatError(error.toJSON(), error));
  return makeServer<Params, Extra>({
    schema: hooks.options.schema,
    // The client has this long after connecting to send its connection_init.
    connectionInitWaitTimeout: 5_000,
    onConnect: (ctx) => authenticateConnection(hooks, ctx),
    onSubscribe: (ctx, _id, payload) => startSubscription(hooks, ctx, payload),
    subscribe: subscribeWithFreshLoaders,
    onNext: (_ctx, _id, _payload, _args, result) => (result.errors ? { ...result, errors: formatAll(result.errors) } : undefined),
    onError: (_ctx, _id, _payload, errors) => formatAll(errors),
  });
}

export function attachLiveServer(http: Server, options: LiveServerOptions): LiveServer {
  const subscribesPerSecond = options.subscribesPerSecond ?? 10;
  const hooks: Hooks = { options, subscribesPerSecond, checkLimits: createRequestLimitsCheck(options.schema, options.limits) };
  const extraOf = (socket: WebSocket, request: IncomingMessage): Extra => ({
    socket,
    request,
    viewer: null,
    subscribes: { tokens: subscribesPerSecond, at: performance.now() },
  });
  return attachLiveSockets(http, createProtocol(hooks), extraOf, {
    ...options,
    maxPayloadBytes: options.limits.bodyBytes,
    keepAliveMs: options.keepAliveMs ?? 12_000,
  });
}
