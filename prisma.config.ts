import { defineConfig } from "prisma/config";

// `prisma generate` needs no schema engine, but the CLI tries to download one
// unless this names an executable; migrations run through the WebAssembly
// engine instead (src/main/migrate.ts).
process.env.PRISMA_SCHEMA_ENGINE_BINARY ??= "/bin/true";

export default defineConfig({
  schema: "prisma/schema.prisma",
  migrations: { path: "prisma/migrations" },
  datasource: {
    url: process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/likes",
  },
});
