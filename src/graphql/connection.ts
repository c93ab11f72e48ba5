// Relay-style connections: { edges { cursor node } pageInfo { hasNextPage endCursor } }.
import { encodeCursor } from "./cursors.js";

export interface Connection<T> {
  readonly edges: readonly { readonly cursor: string; readonly node: T }[];
  readonly pageInfo: { readonly hasNextPage: boolean; readonly endCursor: string | null };
}

export function connection<T>(nodes: readonly T[], hasMore: boolean, cursorOf: (node: T) => string): Connection<T> {
  const edges = nodes.map((node) => ({ cursor: cursorOf(node), node }));
  return { edges, pageInfo: { hasNextPage: hasMore, endCursor: edges.at(-1)?.cursor ?? null } };
}

/** A connection over rows paged by descending id. */
export function idConnection<T extends { readonly id: bigint }>(page: { items: readonly T[]; hasMore: boolean }): Connection<T> {
  return connection(page.items, page.hasMore, (row) => encodeCursor(row.id));
}
