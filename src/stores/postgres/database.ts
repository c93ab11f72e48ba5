import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "../../generated/prisma/client.js";

export type Database = PrismaClient;

export interface DatabaseOptions {
  readonly url: string;
  /** Connections in the pool. */
  readonly poolSize?: number;
  /** Told about a dropped idle connection (PostgreSQL restarted); the pool replaces it. */
  readonly onConnectionError?: (error: Error) => void;
  /** Called for every SQL statement sent (metrics; tests count queries with it). */
  readonly onQuery?: () => void;
}

export function createDatabase(options: DatabaseOptions): Database {
  const report = options.onConnectionError ?? (() => {});
  // Without these listeners a PostgreSQL restart crashes the process with an
  // unhandled 'error' event from an idle pooled connection.
  const adapter = new PrismaPg(
    { connectionString: options.url, max: options.poolSize ?? 10 },
    { onPoolError: report, onConnectionError: report },
  );
  if (!options.onQuery) return new PrismaClient({ adapter });
  const client = new PrismaClient({ adapter, log: [{ emit: "event", level: "query" }] });
  client.$on("query", options.onQuery);
  return client;
}

/** Prisma's error code, when the error is one of Prisma's known request errors. */
export function prismaCode(error: unknown): string | undefined {
  return typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
    ? error.code
    : undefined;
}
