// A PostgreSQL cluster of the fault suite's own (initdb + pg_ctl into a
// temporary directory, on a free port), so it can be crashed and restarted
// without disturbing anyone. Where that cannot be made, the suite falls back to
// databases of its own on the shared server, and the restart case is skipped.
import { execFile, execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { migrate } from "../../src/stores/postgres/migrate.js";
import { freePort } from "../lib/ports.js";

const run = promisify(execFile);

export interface PostgresInstance {
  /** Where it runs, for the report. */
  readonly description: string;
  /** Why a restart cannot be injected, or null when it can. */
  readonly restartUnavailable: string | null;
  /** A new database with the service's schema, empty; returns its URL. */
  createDatabase(name: string): Promise<string>;
  /** Stops the server as a crash would (immediate mode: no checkpoint), waits `downMs`, starts it again. */
  crashAndRestart(downMs: number): Promise<void>;
  stop(): Promise<void>;
}

/** The newest PostgreSQL server binaries Debian installed, or null. */
function serverBinaries(): string | null {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => existsSync(path.join(root, v, "bin", "initdb")))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? path.join(root, versions[0], "bin") : null;
}

/** Runs a server binary as a user it accepts: initdb and postgres refuse to run as root. */
async function asServerUser(binary: string, args: string[], asPostgres: boolean): Promise<void> {
  const [command, argv] = asPostgres ? ["runuser", ["-u", "postgres", "--", binary, ...args]] : [binary, args];
  await run(command, argv, { timeout: 60_000 });
}

async function admin<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

/** Databases cloned from a migrated template: one migration per run, a fresh database per case in a fraction of a second. */
function databaseMaker(serverUrl: (database: string) => string, templateName: string) {
  let template: Promise<unknown> | undefined;
  return async (name: string): Promise<string> => {
    template ??= migrate(serverUrl(templateName));
    await template;
    await admin(serverUrl("postgres"), async (client) => {
      await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      // The migration's own connections may linger on the template, which CREATE … TEMPLATE refuses.
      await client.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", [templateName]);
      await client.query(`CREATE DATABASE "${name}" TEMPLATE "${templateName}"`);
    });
    return serverUrl(name);
  };
}

async function startPrivateCluster(bin: string, templateName: string): Promise<PostgresInstance> {
  const asPostgres = userInfo().uid === 0;
  const dir = mkdtempSync(path.join(tmpdir(), "likes-chaos-postgres-"));
  if (asPostgres) {
    const { stdout } = await run("id", ["-u", "postgres"]);
    const { stdout: group } = await run("id", ["-g", "postgres"]);
    chownSync(dir, Number(stdout.trim()), Number(group.trim()));
  }
  const data = path.join(dir, "data");
  const port = await freePort();
  const pgCtl = path.join(bin, "pg_ctl");
  // fsync off: the faults here kill processes, not the machine, and the page cache survives a process.
  const serverOptions = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  const start = () => asServerUser(pgCtl, ["-D", data, "-l", path.join(dir, "server.log"), "-o", serverOptions, "-w", "-t", "60", "start"], asPostgres);
  const halt = (mode: "immediate" | "fast") => asServerUser(pgCtl, ["-D", data, "-m", mode, "-w", "stop"], asPostgres);
  await asServerUser(path.join(bin, "initdb"), ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync"], asPostgres);
  await start();
  // An exit handler cannot wait for a promise: the cluster is stopped synchronously there.
  const orphaned = () => {
    const argv = ["-D", data, "-m", "immediate", "-w", "stop"];
    try {
      if (asPostgres) execFileSync("runuser", ["-u", "postgres", "--", pgCtl, ...argv], { stdio: "ignore" });
      else execFileSync(pgCtl, argv, { stdio: "ignore" });
    } catch {
      // Already stopped.
    }
    rmSync(dir, { recursive: true, force: true });
  };
  process.on("exit", orphaned);
  const serverUrl = (database: string) => `postgresql://postgres@127.0.0.1:${port}/${database}`;
  return {
    description: `private cluster on port ${port} (${dir})`,
    restartUnavailable: null,
    createDatabase: databaseMaker(serverUrl, templateName),
    async crashAndRestart(downMs) {
      await halt("immediate");
      await new Promise((resolve) => setTimeout(resolve, downMs));
      await start();
    },
    async stop() {
      process.off("exit", orphaned);
      await halt("immediate").catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Databases of the suite's own on the shared server (`sharedUrl`'s host), which it must never restart. */
function sharedServer(sharedUrl: string, templateName: string, reason: string): PostgresInstance {
  const serverUrl = (database: string) => {
    const url = new URL(sharedUrl);
    url.pathname = `/${database}`;
    return url.toString();
  };
  const made: string[] = [];
  const make = databaseMaker(serverUrl, templateName);
  return {
    description: `databases ${templateName.replace(/_template$/, "")}_* on the shared server ${new URL(sharedUrl).host}`,
    restartUnavailable: `no private PostgreSQL cluster (${reason}); the shared server is never restarted`,
    async createDatabase(name) {
      made.push(name);
      return make(name);
    },
    async crashAndRestart() {
      throw new Error("the shared PostgreSQL server is never restarted");
    },
    async stop() {
      await admin(serverUrl("postgres"), async (client) => {
        for (const name of [...made, templateName]) await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      }).catch(() => undefined);
    },
  };
}

/**
 * A private cluster when this machine can make one, else the shared server at
 * `sharedUrl`. Databases are named by the caller; `runTag` names the template.
 */
export async function startPostgresInstance(sharedUrl: string, runTag: string): Promise<PostgresInstance> {
  const templateName = `${runTag}_template`;
  const bin = serverBinaries();
  if (!bin) return sharedServer(sharedUrl, templateName, "no initdb under /usr/lib/postgresql/*/bin");
  try {
    return await startPrivateCluster(bin, templateName);
  } catch (error) {
    return sharedServer(sharedUrl, templateName, `initdb or pg_ctl failed: ${(error as Error).message.split("\n")[0]}`);
  }
}
