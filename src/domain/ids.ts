import { badInput } from "../errors.js";

/** The largest id a bigint column holds. */
export const maxId = 2n ** 63n - 1n;

/** Parses a GraphQL ID into a database id: a positive decimal that fits a bigint column. */
export function parseId(raw: string, field: string): bigint {
  if (!/^[1-9][0-9]{0,18}$/.test(raw)) {
    throw badInput(field, `${field} must be a positive decimal id such as "42"; got ${JSON.stringify(raw.slice(0, 40))}.`);
  }
  const id = BigInt(raw);
  if (id > maxId) throw badInput(field, `${field} is larger than any id (at most ${maxId}).`);
  return id;
}

/** Opaque cursor for keyset paging over descending or ascending ids. */
export function encodeCursor(id: bigint): string {
  return Buffer.from(`c:${id}`).toString("base64url");
}

export function decodeCursor(cursor: string, field = "after"): bigint {
  const text = Buffer.from(cursor, "base64url").toString();
  const match = /^c:([1-9][0-9]{0,18})$/.exec(text);
  // Nineteen digits can still exceed a bigint column, which PostgreSQL would refuse mid-query.
  if (!match?.[1] || BigInt(match[1]) > maxId) throw badInput(field, `${field} is not a cursor this service issued; pass a pageInfo.endCursor back unchanged.`);
  return BigInt(match[1]);
}

export const maxPageSize = 100;

export function parsePageSize(first: number, field = "first"): number {
  if (!Number.isInteger(first) || first < 0 || first > maxPageSize) {
    throw badInput(field, `${field} must be an integer from 0 to ${maxPageSize}; got ${first}.`);
  }
  return first;
}
