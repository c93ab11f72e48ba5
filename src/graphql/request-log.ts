// One JSON line per GraphQL request, written once the response is complete.
// Written from Fastify's onResponse hook rather than from an Apollo plugin alone:
// only there are the final status and the whole duration (body parsing and token
// check included) known, and requests Apollo never turns into an operation (a
// body that is not JSON, a refused origin) still get their line.
import type { Logger } from "pino";
import type { OperationFacts } from "./plugins/operation-facts.js";

/** What HTTP knows of a request once it is answered. */
export interface HttpFacts {
  /** From `x-request-id` when the client sent a usable one, else generated; echoed in the response. */
  readonly requestId: string;
  /** The client's address (the proxy's, unless Fastify is told to trust X-Forwarded-For). */
  readonly clientIp: string;
  readonly status: number;
  /** From the first byte of the request to the last of the response, in milliseconds. */
  readonly durationMs: number;
}

export interface RequestLogOptions {
  readonly logger: Logger;
  /** Level of a line for a request answered below 500; default "info". Answers of 500 and above log at "error". */
  readonly level?: "info" | "debug";
}

export type RequestLog = (http: HttpFacts, operation: OperationFacts | undefined) => void;

export function createRequestLog(options: RequestLogOptions): RequestLog {
  const log = options.logger.child({ component: "request" });
  const level = options.level ?? "info";
  return (http, operation) => {
    const lineLevel = http.status >= 500 ? "error" : level;
    // A line the logger would drop (LOG_LEVEL=warn, as benches and many deployments run) is not built.
    if (!log.isLevelEnabled(lineLevel)) return;
    const line = {
      requestId: http.requestId,
      clientIp: http.clientIp,
      operationName: operation?.operationName ?? null,
      operationType: operation?.operationType ?? null,
      status: http.status,
      durationMs: Math.round(http.durationMs * 100) / 100,
      errorCodes: operation?.errorCodes ?? [],
      viewerId: operation?.viewerId ?? null,
    };
    log[lineLevel](line, "graphql request");
  };
}
