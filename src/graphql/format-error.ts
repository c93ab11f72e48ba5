// Expected errors keep their code and message; a store that did not answer is
// SERVICE_UNAVAILABLE; everything else is masked as INTERNAL_SERVER_ERROR and
// logged with its cause, never sent with a stack.
import type { GraphQLFormattedError } from "graphql";
import type { Logger } from "pino";
import { DomainError, ErrorCode, RateLimitedError } from "../errors.js";

/** Codes Apollo and graphql-js give to problems with the request itself. */
const requestErrorCodes = new Set([
  "GRAPHQL_PARSE_FAILED",
  "GRAPHQL_VALIDATION_FAILED",
  "BAD_USER_INPUT",
  "BAD_REQUEST",
  "PERSISTED_QUERY_NOT_FOUND",
  "PERSISTED_QUERY_NOT_SUPPORTED",
  "OPERATION_RESOLUTION_FAILURE",
]);

/** The error a resolver threw, under the GraphQLError(s) wrapped around it. */
function rootCause(error: unknown): unknown {
  let current = error;
  while (typeof current === "object" && current !== null && "originalError" in current && current.originalError) {
    current = current.originalError;
  }
  return current;
}

export function createFormatError(logger: Logger, isUnavailable: (error: unknown) => boolean) {
  return (formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError => {
    const original = rootCause(error);
    if (original instanceof DomainError) {
      return {
        message: original.message,
        locations: formatted.locations,
        path: formatted.path,
        extensions: {
          code: original.code,
          ...(original.field ? { field: original.field } : {}),
          ...(original instanceof RateLimitedError ? { retryAfterSeconds: original.retryAfterSeconds } : {}),
        },
      };
    }
    const code = formatted.extensions?.code;
    if (typeof code === "string" && requestErrorCodes.has(code)) {
      const { stacktrace: _, ...extensions } = formatted.extensions ?? {};
      return { ...formatted, extensions };
    }
    if (isUnavailable(original)) {
      logger.warn({ err: original, path: formatted.path }, "a store did not answer in time");
      return {
        message: "The service could not reach its storage in time; retry shortly.",
        path: formatted.path,
        extensions: { code: ErrorCode.SERVICE_UNAVAILABLE },
      };
    }
    logger.error({ err: original, path: formatted.path }, "internal error while answering a request");
    return { message: "Internal server error", path: formatted.path, extensions: { code: "INTERNAL_SERVER_ERROR" } };
  };
}
