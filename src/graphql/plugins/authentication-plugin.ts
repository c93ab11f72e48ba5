// A bearer token that was sent but not accepted fails the whole operation before
// any resolver runs, queries included: a client whose token went bad hears it at
// once instead of quietly reading as nobody. Only an operation that does nothing
// but sign in (login, register) goes through, so such a client can get a new token.
import type { ApolloServerPlugin } from "@apollo/server";
import { GraphQLError, OperationTypeNode, type DocumentNode, type OperationDefinitionNode } from "graphql";
import { ErrorCode, unauthenticated } from "../../errors.js";
import type { Context } from "../context.js";
import { rootFieldNames, signInFields } from "../root-fields.js";

/** Whether the operation is refused for its token: one was sent and not accepted, and it does more than sign in. */
export function tokenRefused(ctx: Context, operation: OperationDefinitionNode, document: DocumentNode): boolean {
  if (ctx.tokenProblem === null) return false;
  return !(operation.operation === OperationTypeNode.MUTATION && rootFieldNames(operation, document).every((name) => signInFields.has(name)));
}

/**
 * Refuses with UNAUTHENTICATED and HTTP 401: the status RFC 6750 gives a bearer
 * token that is expired, revoked or malformed, with `WWW-Authenticate: Bearer
 * error="invalid_token"`, so HTTP clients and gateways can tell it from a fault
 * and sign in again; GraphQL clients read the same error from the JSON body.
 */
export function authenticationPlugin(): ApolloServerPlugin<Context> {
  return {
    async requestDidStart() {
      return {
        async didResolveOperation({ contextValue, operation, document }) {
          const problem = contextValue.tokenProblem;
          if (problem === null || !operation || !tokenRefused(contextValue, operation, document)) return;
          throw new GraphQLError(problem, {
            originalError: unauthenticated(problem),
            extensions: {
              code: ErrorCode.UNAUTHENTICATED,
              http: { status: 401, headers: new Map([["www-authenticate", 'Bearer error="invalid_token"']]) },
            },
          });
        },
      };
    },
  };
}
