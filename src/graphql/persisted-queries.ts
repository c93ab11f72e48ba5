// Persisted queries, in one of three modes (PERSISTED_QUERIES):
// - "apq": automatic persisted queries (Apollo's protocol). A client sends a query's
//   SHA-256 alone; an unknown hash answers PERSISTED_QUERY_NOT_FOUND and the client
//   sends the text with it once, which every API process then knows (a store shared in Redis).
// - "safelist": only the operations of a manifest run, by hash or by text. For apps
//   that ship their operations: nothing else can be asked of the service.
// - "off": texts only; a persisted-query extension answers PERSISTED_QUERY_NOT_SUPPORTED.
import { createHash } from "node:crypto";
import type { ApolloServerOptions } from "@apollo/server";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { PersistedQueryStore } from "../domain/ports/index.js";
import { RequestErrorCode } from "../errors.js";

export type PersistedQueries =
  | { readonly mode: "apq"; readonly store: PersistedQueryStore }
  | { readonly mode: "safelist"; readonly operations: ReadonlyMap<string, string> }
  | { readonly mode: "off" };

/** Apollo's name for the cache of persisted queries; ours has no other use, so no prefix is needed. */
const apolloPrefix = "apq:";
const unprefixed = (key: string) => (key.startsWith(apolloPrefix) ? key.slice(apolloPrefix.length) : key);

/** Apollo's `persistedQueries` option for a mode; Apollo's TTL is unused (the store keeps its own). */
export function apolloPersistedQueries(persisted: PersistedQueries): ApolloServerOptions<never>["persistedQueries"] {
  if (persisted.mode === "off") return false;
  const lookup = persisted.mode === "apq" ? persisted.store : { get: async (hash: string) => persisted.operations.get(hash), set: async () => {} };
  return {
    cache: {
      get: (key) => lookup.get(unprefixed(key)),
      set: (key, value) => lookup.set(unprefixed(key), value),
      delete: async () => {},
    },
    ttl: null,
  };
}

export const notInSafelist = "This service runs only the operations of its safelist (PERSISTED_QUERIES=safelist); this one is not among them.";

/** The query texts a request to /graphql sends: a GET's `query` parameter, a POST's `query` (or each of a batch's). */
function textsOf(request: FastifyRequest): unknown[] {
  if (request.method === "GET") return [(request.query as { query?: unknown } | undefined)?.query];
  const body: unknown = request.body;
  return (Array.isArray(body) ? body : [body]).map((item) => (typeof item === "object" && item !== null ? (item as { query?: unknown }).query : undefined));
}

/**
 * Refuses, in safelist mode, a request whose query text is not among the manifest's
 * operations, before Apollo parses, validates or prices it: an operation refused
 * spends no rate budget, and its validation errors cannot describe the schema. A
 * request with a hash alone reaches Apollo, whose lookup knows the manifest's alone.
 * `sent` hears the code, for the request log.
 */
export function refuseOutsideSafelist(
  http: FastifyInstance,
  operations: ReadonlyMap<string, string>,
  sent: (request: FastifyRequest, code: string) => void,
): void {
  const allowed = inSafelist(operations);
  http.addHook("preHandler", (request, reply, done) => {
    if (request.routeOptions.url !== "/graphql") return done();
    const texts = textsOf(request).filter((text) => text !== undefined);
    if (texts.every((text) => typeof text === "string" && allowed(text))) return done();
    sent(request, RequestErrorCode.OPERATION_NOT_IN_SAFELIST);
    void reply.code(400).send({ errors: [{ message: notInSafelist, extensions: { code: RequestErrorCode.OPERATION_NOT_IN_SAFELIST } }] });
  });
}

/** Whether a subscription's text is one of the manifest's operations. */
export const inSafelist =
  (operations: ReadonlyMap<string, string>) =>
  (query: string): boolean =>
    operations.has(sha256Hex(query));

const sha256Hex = (text: string) => createHash("sha256").update(text).digest("hex");

/**
 * The operations of a persisted query manifest, by SHA-256 of their text: Apollo's
 * format (`@apollo/generate-persisted-query-manifest`), `{ format:
 * "apollo-persisted-query-manifest", version: 1, operations: [{ id, body, … }] }`,
 * where each id is the body's SHA-256, as the client sends it. Throws on another shape.
 */
export function parseManifest(text: string): ReadonlyMap<string, string> {
  const manifest = JSON.parse(text) as { format?: unknown; version?: unknown; operations?: unknown };
  if (manifest.format !== "apollo-persisted-query-manifest" || manifest.version !== 1 || !Array.isArray(manifest.operations)) {
    throw new Error(
      'The manifest is not an Apollo persisted query manifest: expected { "format": "apollo-persisted-query-manifest", "version": 1, "operations": [...] }.',
    );
  }
  const operations = new Map<string, string>();
  (manifest.operations as unknown[]).forEach((entry, i) => {
    const operation = (typeof entry === "object" && entry !== null ? entry : {}) as { id?: unknown; name?: unknown; body?: unknown };
    const which = `operations[${i}]${typeof operation.name === "string" ? ` (${operation.name})` : ""}`;
    if (typeof operation.body !== "string") throw new Error(`The manifest's ${which} has no body.`);
    const hash = sha256Hex(operation.body);
    if (operation.id !== undefined && operation.id !== hash)
      throw new Error(`The manifest's ${which} has id ${JSON.stringify(operation.id)}, not the SHA-256 of its body (${hash}).`);
    operations.set(hash, operation.body);
  });
  return operations;
}
