// The expected errors of the service, each with a stable code clients can branch on.
// Anything else is an internal error: masked for clients, logged with its cause.

export const ErrorCode = {
  /** A mutation was sent without a bearer token, or the token sent was not accepted. */
  UNAUTHENTICATED: "UNAUTHENTICATED",
  /** The id is well formed but names nothing. */
  NOT_FOUND: "NOT_FOUND",
  /** An argument is malformed, out of range, or breaks a rule (message says which). */
  BAD_USER_INPUT: "BAD_USER_INPUT",
  /** The caller is known but may not do this or see this (another user's private data; a target that takes no more likes). */
  FORBIDDEN: "FORBIDDEN",
  /** The caller sent more than its share; retry later. */
  RATE_LIMITED: "RATE_LIMITED",
  /**
   * A store the answer needs (Redis, PostgreSQL) did not answer in time or could not be
   * reached. A mutation may or may not have taken effect: retrying a like or unlike is
   * safe (liking twice counts once); retrying createPost may create a second post.
   */
  SERVICE_UNAVAILABLE: "SERVICE_UNAVAILABLE",
  /**
   * Redis is near its memory limit, so a target it does not hold (a post not read or
   * liked lately) is not loaded: nothing was done, and retrying is safe once cold
   * targets have been evicted (seconds). What Redis holds is still read and changed,
   * and anonymous counts are still answered.
   */
  OVER_CAPACITY: "OVER_CAPACITY",
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/**
 * Codes of requests refused before any resolver runs: the document or the HTTP
 * request itself is at fault. The limits put what they measured and the limit in
 * `extensions` beside the code (for example `{ code, cost, limit }`).
 */
export const RequestErrorCode = {
  /** The body or a JSON value in it is not valid JSON, or the request has no usable query. */
  BAD_REQUEST: "BAD_REQUEST",
  /** The body is larger than MAX_BODY_BYTES (HTTP 413; `extensions.limit` in bytes). */
  PAYLOAD_TOO_LARGE: "PAYLOAD_TOO_LARGE",
  /** No route at this path (GraphQL is served on /graphql only; HTTP 404). */
  ROUTE_NOT_FOUND: "ROUTE_NOT_FOUND",
  /** A method /graphql does not take (PUT, DELETE, PATCH…; HTTP 405 with `Allow: GET, POST, OPTIONS`). */
  METHOD_NOT_ALLOWED: "METHOD_NOT_ALLOWED",
  /** Fields nest deeper than MAX_QUERY_DEPTH (`extensions.depth`, `extensions.limit`). */
  QUERY_TOO_DEEP: "QUERY_TOO_DEEP",
  /** The operation could resolve more objects than MAX_QUERY_COST allows (`extensions.cost`, `extensions.limit`). */
  QUERY_TOO_COSTLY: "QUERY_TOO_COSTLY",
  /** The operation renames more fields than MAX_ALIASES (`extensions.aliases`, `extensions.limit`). */
  TOO_MANY_ALIASES: "TOO_MANY_ALIASES",
  /** A mutation operation has more root fields than MAX_MUTATIONS (`extensions.mutations`, `extensions.limit`). */
  TOO_MANY_MUTATIONS: "TOO_MANY_MUTATIONS",
  /** The variables hold more values than MAX_VARIABLE_VALUES (`extensions.values`, `extensions.limit`). */
  VARIABLES_TOO_LARGE: "VARIABLES_TOO_LARGE",
  /** An automatic persisted query hash is unknown to this server: send the query with its hash. */
  PERSISTED_QUERY_NOT_FOUND: "PERSISTED_QUERY_NOT_FOUND",
  /** Automatic persisted queries are turned off on this server. */
  PERSISTED_QUERY_NOT_SUPPORTED: "PERSISTED_QUERY_NOT_SUPPORTED",
  /** The persisted query's `sha256Hash` is not the SHA-256 of the query sent with it. */
  PERSISTED_QUERY_HASH_MISMATCH: "PERSISTED_QUERY_HASH_MISMATCH",
  /** PERSISTED_QUERIES=safelist: the operation sent is not among those of the service's manifest. */
  OPERATION_NOT_IN_SAFELIST: "OPERATION_NOT_IN_SAFELIST",
  /** The persisted query extension names a version other than 1. */
  PERSISTED_QUERY_VERSION_UNSUPPORTED: "PERSISTED_QUERY_VERSION_UNSUPPORTED",
  /** A subscription sent over plain HTTP (subscriptions need a WebSocket connection), or a query or mutation sent over WebSocket. */
  OPERATION_NOT_SUPPORTED: "OPERATION_NOT_SUPPORTED",
  /** A WebSocket connection asked for more subscriptions at once than LIVE_MAX_SUBSCRIPTIONS. */
  TOO_MANY_SUBSCRIPTIONS: "TOO_MANY_SUBSCRIPTIONS",
} as const;

export type RequestErrorCode = (typeof RequestErrorCode)[keyof typeof RequestErrorCode];

export class DomainError extends Error {
  override readonly name = "DomainError";
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** The argument at fault, for BAD_USER_INPUT. */
    readonly field?: string,
  ) {
    super(message);
  }
}

export const unauthenticated = (message = "Sign in first: send an Authorization: Bearer <token> header.") =>
  new DomainError(ErrorCode.UNAUTHENTICATED, message);

export const notFound = (what: string, id: bigint | string) => new DomainError(ErrorCode.NOT_FOUND, `No ${what} has id ${id}.`);

export const badInput = (field: string, message: string) => new DomainError(ErrorCode.BAD_USER_INPUT, message, field);

export const forbidden = (message: string) => new DomainError(ErrorCode.FORBIDDEN, message);

/**
 * A target's relation holds the most members its membership can (the membership
 * store's status for it); the membership use case answers it as FORBIDDEN.
 */
export class TargetFullError extends Error {
  override readonly name = "TargetFullError";
  constructor(readonly target: { readonly type: string; readonly id: bigint }) {
    super(`${target.type} ${target.id} has reached the most members its membership shards can hold.`);
  }
}

/**
 * SERVICE_UNAVAILABLE with how long to wait before retrying (HTTP Retry-After and
 * `extensions.retryAfterSeconds`): nothing was done, and a retry after it may work.
 */
export class UnavailableError extends DomainError {
  constructor(
    message: string,
    readonly retryAfterSeconds = 1,
  ) {
    super(ErrorCode.SERVICE_UNAVAILABLE, message);
  }
}

/**
 * A budget of the caller's is spent (RATE_LIMITED): nothing was done, and the
 * same request is accepted again after `retryAfterSeconds` (a whole number, at least 1).
 * `budget`, when a rate budget refused, is its size and how long until it is full
 * again (the response's RateLimit-Limit and RateLimit-Reset).
 */
export class RateLimitedError extends DomainError {
  constructor(
    readonly retryAfterSeconds: number,
    what: string,
    readonly budget?: { readonly limit: number; readonly resetSeconds: number },
  ) {
    super(ErrorCode.RATE_LIMITED, `Too many ${what}; retry in ${retryAfterSeconds} s.`);
  }
}
