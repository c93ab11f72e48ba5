import { ensureDatabase } from "./create-database.js";
import { applyMigrations, openSchemaEngine } from "./schema-engine.js";

/** Creates the database when missing and applies pending migrations; returns the names applied. */
export async function migrate(databaseUrl: string): Promise<string[]> {
  await ensureDatabase(databaseUrl);
  const engine = await openSchemaEngine(databaseUrl);
  try {
    return await applyMigrations(engine);
  } finally {
    engine.free();
  }
}
