// Prisma's own schema engine, run as WebAssembly: `prisma migrate` would
// download a native engine binary, which is not available offline. The same
// engine records applied migrations in `_prisma_migrations`, so
// `prisma migrate deploy` stays interchangeable where the binary is at hand.
import { readFile, readdir } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { PrismaPg } from "@prisma/adapter-pg";
import { bindMigrationAwareSqlAdapterFactory, DriverAdapterError } from "@prisma/driver-adapter-utils";
import type { SchemaEngine } from "@prisma/schema-engine-wasm";
import pg from "pg";
import { withSessionOptions } from "./session-options.js";

// src/stores/postgres/ or, compiled, dist/stores/postgres/: the project is three levels up either way.
export const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
export const schemaPath = path.join(projectRoot, "prisma/schema.prisma");
export const migrationsDir = path.join(projectRoot, "prisma/migrations");

const noFilters = { externalTables: [], externalEnums: [] };

// Node's WebAssembly global; the ES library typings this project compiles against do not declare it.
const wasmRuntime = (
  globalThis as unknown as {
    WebAssembly: { instantiate(bytes: Uint8Array, imports: object): Promise<{ instance: { exports: Record<string, unknown> } }> };
  }
).WebAssembly;

/**
 * The engine's module, instantiated by hand: its package imports a .wasm file
 * directly, which Node 20 loads only behind --experimental-wasm-modules.
 */
async function loadSchemaEngine(): Promise<typeof SchemaEngine> {
  // Where the engine leaves its message when it panics; Prisma's CLI sets the same global.
  const registry = globalThis as { PRISMA_WASM_PANIC_REGISTRY?: { set_message(message: string): void } };
  registry.PRISMA_WASM_PANIC_REGISTRY ??= {
    set_message: (message) => console.error(`Prisma schema engine panicked: ${message}`),
  };
  const bindingsPath = createRequire(import.meta.url).resolve("@prisma/schema-engine-wasm/schema_engine_bg");
  const bindings = await import("@prisma/schema-engine-wasm/schema_engine_bg");
  const bytes = await readFile(path.join(path.dirname(bindingsPath), "schema_engine_bg.wasm"));
  const { instance } = await wasmRuntime.instantiate(bytes, { "./schema_engine_bg.js": bindings });
  (bindings as unknown as { __wbg_set_wasm(exports: object): void }).__wbg_set_wasm(instance.exports);
  (instance.exports.__wbindgen_start as () => void)();
  return bindings.SchemaEngine;
}

/**
 * PrismaPg whose migration scripts reach PostgreSQL whole, as one simple query, as the
 * native engine sends them: PrismaPg's own executeScript splits a script at every `;`
 * (breaking `DO $$ … $$` blocks) and runs the pieces one by one on any pool connection,
 * each committed alone. Whole, a migration runs in one implicit transaction: it applies
 * entirely or not at all.
 */
class WholeScriptPg extends PrismaPg {
  private readonly connected: { dispose(): Promise<void> }[] = [];

  override async connect(): ReturnType<PrismaPg["connect"]> {
    const adapter = await super.connect();
    this.connected.push(adapter);
    const pool = adapter.underlyingDriver();
    adapter.executeScript = async (script: string) => {
      try {
        await pool.query(script);
      } catch (error) {
        if (!(error instanceof pg.DatabaseError)) throw error;
        // The shape PrismaPg gives a PostgreSQL error, so the engine reports it the same way.
        const { code = "N/A", severity = "N/A", message, detail, column, hint } = error;
        throw new DriverAdapterError({ kind: "postgres", code, severity, message, detail, column, hint, originalCode: code, originalMessage: message });
      }
    };
    return adapter;
  }

  /** Ends the pools of the connections the engine opened, which freeing the engine leaves open. */
  async close(): Promise<void> {
    await Promise.all(this.connected.splice(0).map((adapter) => adapter.dispose()));
  }
}

/** Settings a migration reads (current_setting), handed to it as options of every connection. */
export interface MigrationSettings {
  /** Partitions of the relation tables, read by 0007_partition_relations when it runs (likes.relation_partitions). */
  readonly relationPartitions?: number;
}

let loadedEngine: Promise<typeof SchemaEngine> | undefined;

/** The schema engine over one database, until closed. */
export interface SchemaEngineSession {
  readonly engine: SchemaEngine;
  /**
   * Frees the engine and ends its connections: left open, their idle clients keep a process
   * alive for pg's idle timeout, ten seconds after `npm run migrate` had finished.
   */
  close(): Promise<void>;
}

export async function openSchemaEngine(databaseUrl: string, settings: MigrationSettings = {}): Promise<SchemaEngineSession> {
  const datamodel = await readFile(schemaPath, "utf8");
  const options = settings.relationPartitions === undefined ? [] : [`likes.relation_partitions=${settings.relationPartitions}`];
  const driver = new WholeScriptPg({ connectionString: withSessionOptions(databaseUrl, options) });
  // Instantiated once per process: a second start of the same bindings panics ("FnOnce called more than once").
  loadedEngine ??= loadSchemaEngine();
  const Engine = await loadedEngine;
  const engine = await Engine.new({ datamodels: [["schema.prisma", datamodel]] }, () => {}, bindMigrationAwareSqlAdapterFactory(driver));
  return {
    engine,
    async close() {
      engine.free();
      await driver.close();
    },
  };
}

interface MigrationOnDisk {
  name: string;
  sql: string;
}

export async function readMigrations(): Promise<MigrationOnDisk[]> {
  const entries = await readdir(migrationsDir, { withFileTypes: true }).catch(() => []);
  const names = entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  return Promise.all(
    names.map(async (name) => ({
      name,
      sql: await readFile(path.join(migrationsDir, name, "migration.sql"), "utf8"),
    })),
  );
}

/**
 * Applies every migration in prisma/migrations not yet recorded, or those up to and including
 * `upTo` (a migration's folder name: a database as an older release left it); returns the names applied.
 */
export async function applyMigrations(engine: SchemaEngine, upTo?: string): Promise<string[]> {
  const migrations = (await readMigrations()).filter((m) => upTo === undefined || m.name <= upTo);
  const lock = await readFile(path.join(migrationsDir, "migration_lock.toml"), "utf8");
  const result = await engine.applyMigrations({
    migrationsList: {
      baseDir: migrationsDir,
      lockfile: { path: "migration_lock.toml", content: lock },
      migrationDirectories: migrations.map((m) => ({
        path: m.name,
        migrationFile: { path: "migration.sql", content: { tag: "ok", value: m.sql } },
      })),
      shadowDbInitScript: "",
    },
    filters: noFilters,
  });
  return result.appliedMigrationNames;
}

/** SQL that takes a database at schema `from` (or an empty one) to the Prisma schema on disk. */
export async function diffToSchema(engine: SchemaEngine, from: string | null): Promise<string> {
  const content = await readFile(schemaPath, "utf8");
  const result = await engine.diff({
    from: from === null ? { tag: "empty" } : { tag: "schemaDatamodel", files: [{ path: schemaPath, content: from }] },
    to: { tag: "schemaDatamodel", files: [{ path: schemaPath, content }] },
    script: true,
    exitCode: false,
    filters: noFilters,
  });
  return result.stdout ?? "";
}
