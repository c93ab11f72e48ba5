// A deadline per kind of work. Likes and reads are Redis-bound and keep the short
// request deadline (REQUEST_DEADLINE_MS): shed fast under load, they are retried
// at no cost. Creating content and signing in are PostgreSQL-bound (a row, a
// password hash): under load they queue for a connection or a scrypt slot, and
// failing one after a second of queueing would make a user write their post again.
// An operation of those alone gets CONTENT_DEADLINE_MS instead, set once Apollo
// has resolved the operation and before anything of it runs.
import type { ApolloServerPlugin } from "@apollo/server";
import { OperationTypeNode } from "graphql";
import type { Context } from "../context.js";
import { rootFieldNames } from "../root-fields.js";

/** Mutations that write or read PostgreSQL alone (and hash passwords), not Redis. */
export const contentFields: ReadonlySet<string> = new Set(["createPost", "createComment", "register", "login"]);

export function deadlinePlugin(contentDeadlineMs: number): ApolloServerPlugin<Context> {
  return {
    async requestDidStart() {
      return {
        async didResolveOperation({ contextValue, operation, document }) {
          if (operation?.operation !== OperationTypeNode.MUTATION || contextValue.startedAtMs === undefined) return;
          const fields = rootFieldNames(operation, document);
          if (fields.length > 0 && fields.every((name) => contentFields.has(name))) contextValue.deadlineAtMs = contextValue.startedAtMs + contentDeadlineMs;
        },
      };
    },
  };
}
