// What the request limits learn from a document, kept for the next request that
// sends it. Apollo's document cache hands back the same DocumentNode object for the
// same query text, so per-document work (walking it for NUL bytes, measuring its
// shape) is done once per document, and a price once per document, operation and
// the few facts of the variables a price depends on. On the bench's posts(ids:)
// query with 100 ids the limits took about 60 µs a request; remembered, about 3 µs.
import { LRUCache } from "lru-cache";
import type { DocumentNode, GraphQLSchema, OperationDefinitionNode } from "graphql";
import { createNulCheck } from "./nul-bytes.js";
import { measureOperation, type OperationShape } from "./operation-shape.js";
import { createVariablesSignature, queryCost, type QueryCost } from "./query-cost.js";

export interface OperationLimitsFacts {
  readonly shape: OperationShape;
  /** The first argument whose value holds a NUL byte, or null; see nul-bytes.ts. */
  readonly argumentWithNul: (variables: Record<string, unknown>) => string | null;
  /** The same answer as `queryCost` for the operation, from the cache when the variables allow. */
  readonly price: (operationName: string | undefined, variables: Record<string, unknown>) => QueryCost;
}

/** Prices kept, across all documents: the feeds of one client differ in a few page sizes, not thousands. */
const maxPrices = 1_000;
/** Characters of the prices' keys kept, across all documents, so that operations with thousands of variables cannot hold much. */
const maxPriceKeyChars = 256 * 1024;

interface DocumentFacts {
  readonly argumentWithNul: (variables: Record<string, unknown>) => string | null;
  readonly operations: Map<OperationDefinitionNode, OperationLimitsFacts>;
}

/**
 * Facts per document live as long as the document (a WeakMap), so Apollo's own
 * bounded document cache bounds them. Prices live in one LRU for all documents,
 * keyed by a number given to each operation, so a client sending many documents or
 * many variants of one cannot grow it; a price of a document gone from Apollo's
 * cache just ages out. Only pricings are cached: variables that fail coercion
 * have no key (see createVariablesSignature) and are priced afresh each time.
 */
export function createLimitsMemo(schema: GraphQLSchema): (document: DocumentNode, operation: OperationDefinitionNode) => OperationLimitsFacts {
  const documents = new WeakMap<DocumentNode, DocumentFacts>();
  const prices = new LRUCache<string, QueryCost>({ max: maxPrices, maxSize: maxPriceKeyChars, sizeCalculation: (_price, key) => key.length });
  let operationsSeen = 0;

  function operationFacts(document: DocumentNode, operation: OperationDefinitionNode, argumentWithNul: DocumentFacts["argumentWithNul"]): OperationLimitsFacts {
    const id = `${operationsSeen++}:`;
    const signatureOf = createVariablesSignature(schema, operation);
    return {
      // The shape does not depend on the variables.
      shape: measureOperation(document, operation),
      argumentWithNul,
      // Keyed by the operation, not by operationName: a request naming its single
      // operation and one naming none price that same operation alone.
      price(operationName, variables) {
        const signature = signatureOf(variables);
        if (signature === null) return queryCost(schema, document, operationName, variables);
        const key = id + signature;
        const known = prices.get(key);
        if (known) return known;
        const priced = queryCost(schema, document, operationName, variables);
        if (!("badVariables" in priced)) prices.set(key, priced);
        return priced;
      },
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
