// Requests that never reach GraphQL still answer as GraphQL errors with a code:
// a body that is not JSON or too large, an unknown path, a fault in the HTTP
// layer. Fastify's own answers would be JSON of another shape, and clients look
// for `errors[].extensions.code` whatever went wrong.
import type { FastifyError, FastifyInstance, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import { RequestErrorCode } from "../errors.js";
import { ApolloServerErrorCode } from "@apollo/server/errors";

/** The methods served at /graphql: queries by GET, operations by POST, and CORS preflights. */
const graphqlMethods = "GET, POST, OPTIONS";

const graphqlError = (message: string, code: string, extensions: Record<string, unknown> = {}) => ({
  errors: [{ message, extensions: { code, ...extensions } }] as const,
});

function requestProblem(error: FastifyError, bodyLimitBytes: number): { status: number; body: ReturnType<typeof graphqlError> } {
  const status = error.statusCode ?? 500;
  if (status === 413 || error.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
    return {
      status: 413,
      body: graphqlError(
        `The request body is larger than ${bodyLimitBytes} bytes; send a smaller document or fewer variables.`,
        RequestErrorCode.PAYLOAD_TOO_LARGE,
        { limit: bodyLimitBytes },
      ),
    };
  }
  if (error.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE") {
    return { status: 415, body: graphqlError("Send the request as application/json (or a GET with the query in the URL).", RequestErrorCode.BAD_REQUEST) };
  }
  // The JSON parser's errors (a SyntaxError, a forbidden __proto__ key) arrive marked 400 with no code.
  if (error instanceof SyntaxError || error.code === "FST_ERR_CTP_INVALID_JSON_BODY" || error.code === "FST_ERR_CTP_EMPTY_JSON_BODY") {
    return {
      status: 400,
      body: graphqlError(`The request body is not valid JSON (${error.message}); send {"query": "...", "variables": {...}}.`, RequestErrorCode.BAD_REQUEST),
    };
  }
  return { status, body: graphqlError(error.message, RequestErrorCode.BAD_REQUEST) };
}

/**
 * Answers the HTTP layer's errors as GraphQL errors. `sent` hears the code each
 * answer carries, so the request log and the metrics name it as the client saw it.
 */
export function installHttpErrorHandlers(
  http: FastifyInstance,
  logger: Logger,
  bodyLimitBytes: number,
  sent: (request: FastifyRequest, code: string) => void = () => undefined,
): void {
  http.setErrorHandler((error: FastifyError, request, reply) => {
    if ((error.statusCode ?? 500) >= 500) {
      logger.error({ err: error, url: request.url }, "internal error in the HTTP layer");
      sent(request, ApolloServerErrorCode.INTERNAL_SERVER_ERROR);
      return reply.code(500).send(graphqlError("Internal server error", ApolloServerErrorCode.INTERNAL_SERVER_ERROR));
    }
    const { status, body } = requestProblem(error, bodyLimitBytes);
    sent(request, body.errors[0].extensions.code);
    return reply.code(status).send(body);
  });
  http.setNotFoundHandler((request, reply) => {
    // Fastify answers a method no route takes as an unknown path; for /graphql, HTTP says 405 with Allow.
    if (request.url === "/graphql" || request.url.startsWith("/graphql?")) {
      sent(request, RequestErrorCode.METHOD_NOT_ALLOWED);
      return reply
        .code(405)
        .header("allow", graphqlMethods)
        .send(graphqlError(`GraphQL takes ${graphqlMethods} at /graphql, not ${request.method}.`, RequestErrorCode.METHOD_NOT_ALLOWED));
    }
    sent(request, RequestErrorCode.ROUTE_NOT_FOUND);
    return reply
      .code(404)
      .send(
        graphqlError(
          `Nothing is served at ${request.method} ${request.url.slice(0, 200)}: GraphQL is at /graphql, health at /health/live and /health/ready.`,
          RequestErrorCode.ROUTE_NOT_FOUND,
        ),
      );
  });
}
