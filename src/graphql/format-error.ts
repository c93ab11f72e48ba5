// Expected errors keep their code and message; a store that did not answer is
// SERVICE_UNAVAILABLE; everything else is masked as INTERNAL_SERVER_ERROR and
// logged with its cause, never sent with a stack.
import type { GraphQLFormattedError } from "graphql";
import type { Logger } from "pino";
import { DomainError, ErrorCode, RateLimitedError, RequestErrorCode, UnavailableError } from "../errors.js";
import { ApolloServerErrorCode } from "@apollo/server/errors";

/**
 * Codes Apollo, graphql-js and this service's limits give to problems with the request
 * itself, and the service's own codes when a plugin throws them as a GraphQLError
 * (a cost hook's RATE_LIMITED).
 */
const requestErrorCodes = new Set<string>([
  ApolloServerErrorCode.GRAPHQL_PARSE_FAILED,
  ApolloServerErrorCode.GRAPHQL_VALIDATION_FAILED,
  ApolloServerErrorCode.OPERATION_RESOLUTION_FAILURE,
  ...Object.values(RequestErrorCode),
  ...Object.values(ErrorCode),
]);

/**
 * Apollo refuses these persisted-query requests with HTTP 400 but no code (so they
 * would read as internal errors); its messages are matched exactly, and a test
 * sends both cases so that a change of wording in Apollo shows.
 */
const uncodedApolloErrors = new Map<string, { code: RequestErrorCode; message: string }>([
  [
    "provided sha does not match query",
    {
      code: RequestErrorCode.PERSISTED_QUERY_HASH_MISMATCH,
      message: "The persisted query's sha256Hash is not the SHA-256 of the query sent with it; compute it over the exact query text.",
    },
  ],
  [
    "Unsupported persisted query version",
    { code: RequestErrorCode.PERSISTED_QUERY_VERSION_UNSUPPORTED, message: "Only version 1 of the persisted query extension is supported." },
  ],
]);

/** How long a client waits before retrying what a store's outage refused, unless the refusal says. */
export const unavailableRetrySeconds = 1;

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
          ...(original instanceof RateLimitedError || original instanceof UnavailableError
            ? { retryAfterSeconds: original.retryAfterSeconds }
            : original.code === ErrorCode.SERVICE_UNAVAILABLE
              ? { retryAfterSeconds: unavailableRetrySeconds }
              : {}),
        },
      };
    }
    const apolloError = uncodedApolloErrors.get(formatted.message);
    if (apolloError && formatted.extensions?.code === ApolloServerErrorCode.INTERNAL_SERVER_ERROR && !formatted.path) {
      return { message: apolloError.message, extensions: { code: apolloError.code } };
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
        extensions: { code: ErrorCode.SERVICE_UNAVAILABLE, retryAfterSeconds: unavailableRetrySeconds },
      };
    }
    logger.error({ err: original, path: formatted.path }, "internal error while answering a request");
    return { message: "Internal server error", path: formatted.path, extensions: { code: ApolloServerErrorCode.INTERNAL_SERVER_ERROR } };
  };
}
