// What the request limits learn from a document, kept for the next request that
// sends it. Apollo's document cache hands back the same DocumentNode object for the
// same query text, so per-document work (walking it for NUL bytes, measuring its
// shape) is done once per document.
import type { DocumentNode, GraphQLSchema, OperationDefinitionNode } from "graphql";
import { createNulCheck } from "./nul-bytes.js";
import { measureOperation, type OperationShape } from "./operation-shape.js";
import { queryCost, type QueryCost } from "./query-cost.js";

export interface OperationLimitsFacts {
  readonly shape: OperationShape;
  /** The first argument whose value holds a NUL byte, or null; see nul-bytes.ts. */
  readonly argumentWithNul: (variables: Record<string, unknown>) => string | null;
  /** The operation's price (see query-cost.ts). */
  readonly price: (operationName: string | undefined, variables: Record<string, unknown>) => QueryCost;
}

interface DocumentFacts {
  readonly argumentWithNul: (variables: Record<string, unknown>) => string | null;
  readonly operations: Map<OperationDefinitionNode, OperationLimitsFacts>;
}

/** Facts per document live as long as the document (a WeakMap), so Apollo's own bounded document cache bounds them. */
export function createLimitsMemo(schema: GraphQLSchema): (document: DocumentNode, operation: OperationDefinitionNode) => OperationLimitsFacts {
  const documents = new WeakMap<DocumentNode, DocumentFacts>();

  function operationFacts(document: DocumentNode, operation: OperationDefinitionNode, argumentWithNul: DocumentFacts["argumentWithNul"]): OperationLimitsFacts {
    return {
      // The shape does not depend on the variables.
      shape: measureOperation(document, operation),
      argumentWithNul,
      price: (operationName, variables) => queryCost(schema, document, operationName, variables),
    };
  }

  return (document, operation) => {
    let facts = documents.get(document);
    if (!facts) {
      facts = { argumentWithNul: createNulCheck(document), operations: new Map() };
      documents.set(document, facts);
    }
    let known = facts.operations.get(operation);
    if (!known) {
      known = operationFacts(document, operation, facts.argumentWithNul);
      facts.operations.set(operation, known);
    }
    return known;
  };
}
