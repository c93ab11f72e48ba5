// Rebuilds everything under src/generated (the Prisma client) from its sources.
import { execFileSync } from "node:child_process";

// The CLI would download a schema engine it does not need for generation.
execFileSync("node_modules/.bin/prisma", ["generate"], {
  stdio: ["ignore", "ignore", "inherit"],
  env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? "/bin/true" },
});
