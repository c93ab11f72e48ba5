// The nested query an anonymous caller can send: the newest 100 posts, 100
// comments of each, each comment's post, and that post's 100 comments again,
// about a million nodes. Measured against the API alone as configured by
// default (the cost limit refuses it) and with the cost limit lifted (what
// executing it costs now that each connection level is one SQL statement), and
// with `--against`, against another checkout as it is configured by default.
import pg from "pg";
import type { Dataset } from "./dataset.js";
import { startService } from "./harness.js";

export const nestedQuery = `query Nested {
  feed(first: 100) { edges { node { id comments(first: 100) { edges { node { id body
    post { id comments(first: 100) { edges { node { id body } } } } } } } } } }
}`;

export interface NestedFigures {
  readonly service: string;
  readonly status: number;
  readonly code: string;
  readonly cost: number | null;
  readonly seconds: number;
  readonly sqlTransactions: number;
  readonly nodes: number;
  readonly responseMb: number;
  readonly apiPeakRssMb: number;
  readonly apiCpuSeconds: number;
}

/** 100 comments on each of the newest 100 posts, as the feed's first page shows them. */
export async function addComments(sql: pg.Client, data: Dataset): Promise<number> {
  const newest = [...data.postIds].sort((a, b) => (a < b ? 1 : -1)).slice(0, 100);
  await sql.query(
    `INSERT INTO comments (post_id, author_id, body)
     SELECT p, 1 + (p * 100 + n) % $2::bigint, 'Comment ' || n || ' on post ' || p
     FROM unnest($1::bigint[]) AS p, generate_series(1, 100) AS n`,
    [newest.map(String), data.likerIds.length],
  );
  await sql.query(
    `INSERT INTO counters (target_type, target_id, name, value)
     SELECT 'post', post_id, 'comment', count(*) FROM comments GROUP BY post_id
     ON CONFLICT (target_type, target_id, name) DO UPDATE SET value = EXCLUDED.value`,
  );
  await sql.query("VACUUM (ANALYZE) comments");
  return newest.length * 100;
}

/**
 * Transactions ended in `database`, read over a connection to another database so
 * that reading does not count; every statement the API sends outside a
 * transaction block is one. Backends publish their statistics about a second late.
 */
async function committedTransactions(stats: pg.Client, database: string): Promise<number> {
  await stats.query("SELECT pg_stat_clear_snapshot()");
  const { rows } = await stats.query<{ n: string }>("SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1", [database]);
  return Number(rows[0]?.n ?? 0);
}

const countNodes = (value: unknown): number => {
  if (Array.isArray(value)) return value.reduce((n: number, v) => n + countNodes(v), 0);
  if (value === null || typeof value !== "object") return 0;
  const object = value as Record<string, unknown>;
  return ("id" in object ? 1 : 0) + Object.values(object).reduce((n: number, v) => n + countNodes(v), 0);
};

/** Sends the query once to a freshly started API (no pipeline, so the API is the database's only client). */
export async function measureNested(databaseUrl: string, service: string, env: Record<string, string>, directory?: string): Promise<NestedFigures> {
  const url = new URL(databaseUrl);
  const database = url.pathname.slice(1);
  url.pathname = "/postgres";
  const stats = new pg.Client({ connectionString: url.toString() });
  await stats.connect();
  const api = await startService("API only", env, { directory });
  try {
    // The API's first requests load its caches; one small feed first, so the figure is the query's own.
    await fetch(api.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ query: "{ feed(first: 1) { edges { node { id } } } }" }),
    });
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const transactionsBefore = await committedTransactions(stats, database);
    const cpuBefore = api.cpu().api;
    const started = performance.now();
    const response = await fetch(api.url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ query: nestedQuery }) });
    const text = await response.text();
    const seconds = (performance.now() - started) / 1000;
    const apiCpuSeconds = api.cpu().api - cpuBefore;
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const sqlTransactions = (await committedTransactions(stats, database)) - transactionsBefore;
    const body = JSON.parse(text) as { data?: unknown; errors?: { extensions?: { code?: string; cost?: number } }[] };
    const error = body.errors?.[0];
    return {
      service,
      status: response.status,
      code: error?.extensions?.code ?? "none",
      cost: error?.extensions?.cost ?? null,
      seconds: Number(seconds.toFixed(3)),
      sqlTransactions,
      nodes: countNodes(body.data),
      responseMb: Number((text.length / 1e6).toFixed(1)),
      apiPeakRssMb: Math.round(api.peakRssMb()),
      apiCpuSeconds: Number(apiCpuSeconds.toFixed(2)),
    };
  } finally {
    await api.stop();
    await stats.end();
  }
}
