// Entry point of `npm run migrate` and of the image's migration job: creates the
// database when missing and applies pending migrations (DATABASE_URL selects it).
import { loadConfig } from "../config.js";
import { migrate } from "../stores/postgres/migrate.js";

const { databaseUrl } = loadConfig();
const applied = await migrate(databaseUrl);
console.log(applied.length ? `applied migrations: ${applied.join(", ")}` : "database is up to date");
