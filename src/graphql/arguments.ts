// Field arguments as clients send them, parsed into what the use cases take:
// ids into bigints, page sizes into bounded integers. A bad one is BAD_USER_INPUT
// naming the argument, before any use case runs.
import { maxId, isDecimalId } from "../domain/model/index.js";
import { badInput } from "../errors.js";

/** Parses a GraphQL ID into a database id: a positive decimal that fits a bigint column. */
export function parseId(raw: string, field: string): bigint {
  if (!isDecimalId(raw)) {
    throw badInput(field, `${field} must be a positive decimal id such as "42"; got ${JSON.stringify(raw.slice(0, 40))}.`);
  }
  const id = BigInt(raw);
  if (id > maxId) throw badInput(field, `${field} is larger than any id (at most ${maxId}).`);
  return id;
}

export const maxPageSize = 100;

export function parsePageSize(first: number, field = "first"): number {
  if (!Number.isInteger(first) || first < 0 || first > maxPageSize) {
    throw badInput(field, `${field} must be an integer from 0 to ${maxPageSize}; got ${first}.`);
  }
  return first;
}
