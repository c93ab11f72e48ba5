// Creates the database when missing and applies pending migrations.
// Usage: tsx scripts/migrate.ts   (DATABASE_URL selects the database)
import { loadConfig } from "../src/config.js";
import { migrate } from "./lib/migrate.js";

const { databaseUrl } = loadConfig();
const applied = await migrate(databaseUrl);
console.log(applied.length ? `applied migrations: ${applied.join(", ")}` : "database is up to date");
