import pg from "pg";
import { ensureDatabase } from "./create-database.js";
import { applyMigrations, openSchemaEngine, type MigrationSettings } from "./schema-engine.js";

export interface MigrateOptions extends MigrationSettings {
  /** The last migration to apply (its folder name); all when unset. */
  readonly upTo?: string;
}

/**
 * Creates the database when missing and applies pending migrations; returns the names applied.
 * The settings reach the migrations that read them (a migration's own defaults stand for those left out).
 */
export async function migrate(databaseUrl: string, options: MigrateOptions = {}): Promise<string[]> {
  await ensureDatabase(databaseUrl);
  const session = await openSchemaEngine(databaseUrl, options);
  try {
    return await applyMigrations(session.engine, options.upTo);
  } finally {
    await session.close();
  }
}

/** The partitions `likes` has (those of the other relation tables are made alike); 0 while it is not partitioned. */
export async function relationPartitionCount(databaseUrl: string): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>("SELECT count(*) AS n FROM pg_inherits WHERE inhparent = 'likes'::regclass");
    return Number(rows[0]?.n ?? 0);
  } finally {
    await client.end();
  }
}
