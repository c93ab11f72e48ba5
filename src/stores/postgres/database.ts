import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "../../generated/prisma/client.js";
import { withSessionOptions } from "./session-options.js";

export type Database = PrismaClient;

export interface DatabaseOptions {
  readonly url: string;
  /** Connections in the pool. */
  readonly poolSize?: number;
  /** How long getting a connection may take. */
  readonly connectTimeoutMs?: number;
  /**
   * How long a statement may run. PostgreSQL cancels it then (statement_timeout);
   * a server that answers nothing at all (stalled, cut off) is given up on by the
   * client a second later, since it cannot cancel anything.
   */
  readonly statementTimeoutMs?: number;
  /** Told about a dropped idle connection (PostgreSQL restarted); the pool replaces it. */
  readonly onConnectionError?: (error: Error) => void;
  /** Called for every SQL statement answered, with how long it took in milliseconds (metrics; tests count queries with it). */
  readonly onQuery?: (durationMs: number) => void;
}

export function createDatabase(options: DatabaseOptions): Database {
  const report = options.onConnectionError ?? (() => {});
  // Without these listeners a PostgreSQL restart crashes the process with an
  // unhandled 'error' event from an idle pooled connection.
  const adapter = new PrismaPg(
    {
      // No JIT compilation: every statement here is short, and the plans over the partitioned relation
      // tables (one node per partition) cost enough to cross jit_above_cost, where compiling took longer
      // than running (a reconcile page over 1,000,000 likes in 16 partitions: 127 ms with it, 12 ms without).
      connectionString: withSessionOptions(options.url, ["jit=off"]),
      max: options.poolSize ?? 10,
      connectionTimeoutMillis: options.connectTimeoutMs,
      ...(options.statementTimeoutMs && { statement_timeout: options.statementTimeoutMs, query_timeout: options.statementTimeoutMs + 1_000 }),
    },
    { onPoolError: report, onConnectionError: report },
  );
  if (!options.onQuery) return new PrismaClient({ adapter });
  const client = new PrismaClient({ adapter, log: [{ emit: "event", level: "query" }] });
  const onQuery = options.onQuery;
  client.$on("query", (event) => onQuery(event.duration));
  return client;
}

/** Prisma's error code, when the error is one of Prisma's known request errors. */
export function prismaCode(error: unknown): string | undefined {
  return typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : undefined;
}

/**
 * Whether an error says PostgreSQL did not answer in time or could not be
 * reached (statement timeout, no connection), as opposed to a fault of the query.
 */
export function isPostgresUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = prismaCode(error);
  // P1001 unreachable, P1008 timed out, P1017 connection closed, P2024 no connection from the pool in time, P2037 too many connections.
  if (code === "P1001" || code === "P1008" || code === "P1017" || code === "P2024" || code === "P2037") return true;
  // P2028 is every fault of the transaction API; only a transaction that could not start in time (its pool full) is unavailability.
  if (code === "P2028") return /unable to start a transaction in the given time/i.test(error.message);
  // 57014 query_canceled (statement_timeout), 57P01–57P03 the server is shutting down or starting, 53300 too many
  // connections; "timeout exceeded when trying to connect" is pg's pool, every connection busy for connectTimeoutMs.
  return /\b(57014|57P0[123]|53300)\b|statement timeout|Query read timeout|Connection terminated|timeout exceeded when trying to connect|ECONNREFUSED/i.test(
    `${code ?? ""} ${error.message}`,
  );
}
