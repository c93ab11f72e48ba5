// Creates the database when missing and applies pending migrations.
// Usage: tsx scripts/migrate.ts   (DATABASE_URL selects the database)
import { loadConfig } from "../src/config.js";
import { ensureDatabase } from "./lib/database.js";
import { applyMigrations, openSchemaEngine } from "./lib/schema-engine.js";

export async function migrate(databaseUrl: string): Promise<string[]> {
  await ensureDatabase(databaseUrl);
  const engine = await openSchemaEngine(databaseUrl);
  try {
    return await applyMigrations(engine);
  } finally {
    engine.free();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { databaseUrl } = loadConfig();
  const applied = await migrate(databaseUrl);
  console.log(applied.length ? `applied migrations: ${applied.join(", ")}` : "database is up to date");
}
