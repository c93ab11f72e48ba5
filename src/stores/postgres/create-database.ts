import pg from "pg";

/** Creates the database named in `databaseUrl` when it does not exist yet. */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ""));
  if (!/^[A-Za-z0-9_]+$/.test(name)) {
    throw new Error(`Database name "${name}" must be letters, digits and underscores only; change DATABASE_URL.`);
  }
  url.pathname = "/postgres";
  const admin = new pg.Client({ connectionString: url.toString() });
  await admin.connect();
  try {
    const found = await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (found.rowCount === 0) {
      await admin.query(`CREATE DATABASE "${name}"`).catch((error: { code?: string }) => {
        // Another process created it between the check and here.
        if (error.code !== "42P04") throw error;
      });
    }
  } finally {
    await admin.end();
  }
}
