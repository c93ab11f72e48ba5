// Writes prisma/migrations/<NNNN>_<name>/migration.sql with the SQL that takes the
// schema as it stood when prisma/migrations last changed (in git) to prisma/schema.prisma.
// Usage: tsx scripts/make-migration.ts <name>   (commit the migration with the schema change)
import { execFileSync } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { loadConfig } from "../src/config.js";
import { ensureDatabase } from "../src/stores/postgres/create-database.js";
import { diffToSchema, migrationsDir, openSchemaEngine, projectRoot, readMigrations } from "../src/stores/postgres/schema-engine.js";

const name = process.argv[2];
if (!name || !/^[a-z0-9_]+$/.test(name)) {
  console.error("Usage: tsx scripts/make-migration.ts <name>, with a name of lower-case letters, digits and underscores.");
  process.exit(2);
}

/** The schema the existing migrations produce: as committed with the last change to prisma/migrations. */
function migratedSchema(): string | null {
  const git = (...args: string[]) => execFileSync("git", args, { cwd: projectRoot, encoding: "utf8" }).trim();
  const commit = git("log", "-1", "--format=%H", "--", "prisma/migrations");
  return commit ? git("show", `${commit}:prisma/schema.prisma`) : null;
}

const { databaseUrl } = loadConfig();
const existing = await readMigrations();
await ensureDatabase(databaseUrl);
const session = await openSchemaEngine(databaseUrl);
const sql = await diffToSchema(session.engine, existing.length ? migratedSchema() : null).finally(() => session.close());
if (!sql.trim() || /^-- This is an empty migration/.test(sql.trim())) {
  console.log("schema and migrations agree: nothing to write");
  process.exit(0);
}
const dir = path.join(migrationsDir, `${String(existing.length + 1).padStart(4, "0")}_${name}`);
await mkdir(dir, { recursive: true });
await writeFile(path.join(dir, "migration.sql"), sql);
await writeFile(path.join(migrationsDir, "migration_lock.toml"), 'provider = "postgresql"\n');
console.log(`wrote ${path.relative(process.cwd(), dir)}/migration.sql`);
