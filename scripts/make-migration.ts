// Writes prisma/migrations/<NNNN>_<name>/migration.sql with the SQL that takes
// the migrated development database to prisma/schema.prisma.
// Usage: tsx scripts/make-migration.ts <name>
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { loadConfig } from "../src/config.js";
import { diffToSchema, migrationsDir, openSchemaEngine, readMigrations } from "./lib/schema-engine.js";
import { ensureDatabase } from "./lib/database.js";
import { migrate } from "./migrate.js";

const name = process.argv[2];
if (!name || !/^[a-z0-9_]+$/.test(name)) {
  console.error("Usage: tsx scripts/make-migration.ts <name>, with a name of lower-case letters, digits and underscores.");
  process.exit(2);
}
const { databaseUrl } = loadConfig();
const existing = await readMigrations();
await ensureDatabase(databaseUrl);
if (existing.length) await migrate(databaseUrl);
const engine = await openSchemaEngine(databaseUrl);
const sql = await diffToSchema(engine, existing.length ? databaseUrl : null);
engine.free();
if (!sql.trim() || /^-- This is an empty migration/.test(sql.trim())) {
  console.log("schema and migrations agree: nothing to write");
  process.exit(0);
}
const dir = path.join(migrationsDir, `${String(existing.length + 1).padStart(4, "0")}_${name}`);
await mkdir(dir, { recursive: true });
await writeFile(path.join(dir, "migration.sql"), sql);
await writeFile(path.join(migrationsDir, "migration_lock.toml"), 'provider = "postgresql"\n');
console.log(`wrote ${path.relative(process.cwd(), dir)}/migration.sql`);
