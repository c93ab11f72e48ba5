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
  const engine = await openSchemaEngine(databaseUrl, options);
  try {
    return await applyMigrations(engine, options.upTo);
  } finally {
    engine.free();
  }
}
