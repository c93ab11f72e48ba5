// What a GraphQL operation was and how it ended, as Apollo knows it, handed to
// whoever records requests (the request log, the API metrics) once the HTTP
// response is complete.
import type { ApolloServerPlugin } from "@apollo/server";
import type { Context } from "../context.js";
import { ApolloServerErrorCode } from "@apollo/server/errors";

export interface OperationFacts {
  /** The operation's name; null for an anonymous operation or one never resolved. */
  readonly operationName: string | null;
  /** "query", "mutation" or "subscription"; null when the document did not parse, validate or name an operation. */
  readonly operationType: string | null;
  /** `extensions.code` of every error in the response, as the client got them (after masking). */
  readonly errorCodes: readonly string[];
  /** The signed-in viewer's id, or null. */
  readonly viewerId: string | null;
}

/** A name the client sent that named no operation: logged only when it could be a GraphQL name, and short. */
const sentName = (name: string | undefined): string | null => (name && /^[_A-Za-z][_0-9A-Za-z]{0,99}$/.test(name) ? name : null);

/**
 * An Apollo plugin that hands each operation's facts to `record` just before its
 * response is sent. Requests Apollo never sees as an operation (a body that is not
 * JSON, say) produce no facts.
 */
export function operationFactsPlugin(record: (context: Context, facts: OperationFacts) => void): ApolloServerPlugin<Context> {
  return {
    async requestDidStart() {
      return {
        async willSendResponse({ contextValue, operation, operationName, request, response }) {
          const errors = response.body.kind === "single" ? (response.body.singleResult.errors ?? []) : (response.body.initialResult.errors ?? []);
          record(contextValue, {
            operationName: operationName ?? (operation ? null : sentName(request.operationName)),
            operationType: operation?.operation ?? null,
            errorCodes: errors.map((e) => (typeof e.extensions?.code === "string" ? e.extensions.code : ApolloServerErrorCode.INTERNAL_SERVER_ERROR)),
            viewerId: contextValue.viewer ? String(contextValue.viewer.userId) : null,
          });
        },
      };
    },
  };
}
