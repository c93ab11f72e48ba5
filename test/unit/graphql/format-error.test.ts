import { GraphQLError } from "graphql";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { badInput, notFound } from "../../../src/errors.js";
import { createFormatError } from "../../../src/graphql/format-error.js";
import { isStoreUnavailable } from "../../../src/stores/clients.js";

function capture(isUnavailable: (error: unknown) => boolean = () => false) {
  const logged: unknown[] = [];
  const logger = pino({ level: "warn" }, { write: (line: string) => logged.push(JSON.parse(line)) });
  return { logged, format: createFormatError(logger, isUnavailable) };
}

const wrap = (original: Error) => new GraphQLError(original.message, { path: ["likePost"], originalError: original });

describe("formatError", () => {
  it("when a domain error is thrown, then its code and message reach the client", () => {
    const { format } = capture();
    const error = wrap(badInput("postId", "postId must be a positive decimal id."));
    expect(format({ message: error.message, path: ["likePost"] }, error)).toEqual({
      message: "postId must be a positive decimal id.",
      path: ["likePost"],
      locations: undefined,
      extensions: { code: "BAD_USER_INPUT", field: "postId" },
    });
    const missing = wrap(notFound("post", 7n));
    expect(format({ message: missing.message }, missing).extensions).toEqual({ code: "NOT_FOUND" });
  });

  it("when anything else is thrown, then the client sees a masked internal error and the log has the cause", () => {
    const { format, logged } = capture();
    const error = wrap(new Error("connect ECONNREFUSED 10.1.2.3:5432"));
    const formatted = format({ message: error.message, path: ["likePost"], extensions: { code: "INTERNAL_SERVER_ERROR", stacktrace: ["at x"] } }, error);
    expect(formatted).toEqual({ message: "Internal server error", path: ["likePost"], extensions: { code: "INTERNAL_SERVER_ERROR" } });
    expect(JSON.stringify(logged)).toContain("ECONNREFUSED");
  });

  it("when a store did not answer, then the client sees SERVICE_UNAVAILABLE and the log has the cause", () => {
    const { format, logged } = capture(isStoreUnavailable);
    const error = wrap(new Error("Command timed out"));
    const formatted = format({ message: error.message, path: ["likePost"], extensions: { code: "INTERNAL_SERVER_ERROR" } }, error);
    expect(formatted.extensions).toEqual({ code: "SERVICE_UNAVAILABLE", retryAfterSeconds: 1 });
    expect(formatted.message).not.toContain("timed out");
    expect(JSON.stringify(logged)).toContain("Command timed out");
    const fault = wrap(new Error("ERR unknown command"));
    expect(format({ message: fault.message }, fault).extensions).toEqual({ code: "INTERNAL_SERVER_ERROR" });
  });

  it("when the request is invalid, then its own code passes without a stack trace", () => {
    const { format } = capture();
    const formatted = format(
      { message: "Cannot query field", extensions: { code: "GRAPHQL_VALIDATION_FAILED", stacktrace: ["at y"] } },
      new GraphQLError("Cannot query field"),
    );
    expect(formatted.extensions).toEqual({ code: "GRAPHQL_VALIDATION_FAILED" });
  });
});
