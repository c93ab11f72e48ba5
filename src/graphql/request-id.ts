import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";

/**
 * What a client or proxy may send as `x-request-id` and have taken as is: long
 * enough for a UUID, a trace id or a ULID with a prefix, and nothing that could
 * forge a log field or a header.
 */
const usableId = /^[A-Za-z0-9._:-]{1,128}$/;

/** The request's id: its `x-request-id` when usable, otherwise a new UUID. */
export function requestIdOf(request: IncomingMessage): string {
  const sent = request.headers["x-request-id"];
  return typeof sent === "string" && usableId.test(sent) ? sent : randomUUID();
}
