// Entry point of `npm run migrate` and of the image's migration job: creates the
// database when missing and applies pending migrations (DATABASE_URL selects it;
// RELATION_PARTITIONS sets the partition count of the migration that partitions the
// relation tables, and nothing once it has run).
import { loadConfig } from "../config.js";
import { migrate, relationPartitionCount } from "../stores/postgres/migrate.js";

const { databaseUrl, relationPartitions } = loadConfig();
const applied = await migrate(databaseUrl, { relationPartitions });
console.log(applied.length ? `applied migrations: ${applied.join(", ")}` : "database is up to date");
const partitions = await relationPartitionCount(databaseUrl);
if (partitions !== relationPartitions) {
  console.warn(
    `The relation tables have ${partitions} partitions, not RELATION_PARTITIONS (${relationPartitions}): the count is fixed when they are partitioned (docs/scaling.md).`,
  );
}
// Prisma's schema engine leaves a 10 s timer of its own running once freed (a setTimeout of its
// WebAssembly): exit once the output is written, rather than hold `npm start`, `npm test` and a
// migration job ten seconds after the work is done.
process.stdout.write("", () => process.exit(0));
