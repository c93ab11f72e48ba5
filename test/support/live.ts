// A real graphql-ws client of the API's /graphql WebSocket, recording what it receives.
import { createClient, type Client } from "graphql-ws";
import WebSocket from "ws";

export interface Received<T> {
  readonly at: number;
  readonly data: T | null;
  readonly errors: readonly { message: string; extensions?: { code?: string } }[];
}

export interface LiveSubscription<T> {
  readonly received: Received<T>[];
  /** Resolves when the server ends the subscription (complete or error). */
  readonly ended: Promise<void>;
  stop(): void;
}

export interface LiveClient {
  subscribe<T>(query: string, variables?: Record<string, unknown>): LiveSubscription<T>;
  /** The close event of the connection, once it closed. */
  readonly closed: Promise<{ code: number; reason: string }>;
  /** Resolves once the server acknowledged the connection. */
  readonly connected: Promise<void>;
  dispose(): Promise<void>;
}

/** `url` is the API's base URL (http://host:port/); `connectionParams` as a client would send them. */
export function liveClient(url: string, connectionParams?: Record<string, unknown>): LiveClient {
  let onClosed: (event: { code: number; reason: string }) => void = () => {};
  const closed = new Promise<{ code: number; reason: string }>((resolve) => (onClosed = resolve));
  let onConnected: () => void = () => {};
  const connected = new Promise<void>((resolve) => (onConnected = resolve));
  const client: Client = createClient({
    url: new URL("graphql", url).toString().replace(/^http/, "ws"),
    webSocketImpl: WebSocket,
    connectionParams,
    retryAttempts: 0,
    lazy: false,
    on: {
      connected: () => onConnected(),
      closed: (event) => {
        const { code, reason } = event as { code: number; reason: string };
        onClosed({ code, reason: String(reason) });
      },
    },
    onNonLazyError: () => {},
  });
  return {
    closed,
    connected,
    subscribe<T>(query: string, variables: Record<string, unknown> = {}) {
      const received: Received<T>[] = [];
      let end: () => void = () => {};
      const ended = new Promise<void>((resolve) => (end = resolve));
      const stop = client.subscribe<T>(
        { query, variables },
        {
          next: (result) => received.push({ at: Date.now(), data: result.data ?? null, errors: result.errors ?? [] }),
          error: (error) => {
            const errors = Array.isArray(error) ? error : [{ message: String((error as Error)?.message ?? error) }];
            received.push({ at: Date.now(), data: null, errors });
            end();
          },
          complete: () => end(),
        },
      );
      return { received, ended, stop };
    },
    dispose: () => client.dispose() as Promise<void>,
  };
}
