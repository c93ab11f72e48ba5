// The likes-20m scenario, run once for docs/performance.md rather than on every bench: a
// database of its own (`--database` with `_20m` appended, dropped at the end) migrated as far
// as the last release before partitioning, loaded with 20,271,764 likes over 1,000,000 posts
// (n_k = 1,900,000 / (k + 18), at least 2: post 1 has 100,000 likers, post 1,000,000 has 2)
// from 2,000,000 users, each with its relation version and the posts' like counters;
// then timed: a user's and a post's list page on the old tables, the migration that
// partitions them, the same pages on the new, the rebuild of post 1 and of every post
// into Redis, a full reconcile pass, and the persist scenario beside the 20 million rows.
import type pg from "pg";
import pgModule from "pg";
import type { LikeableTarget as Target } from "../../src/domain/model/index.js";
import { migrate } from "../../src/stores/postgres/migrate.js";
import type { PrivateRedis } from "./private-redis.js";
import { persist, type PersistFigures } from "./persist.js";
import { rebuildPosts, reconcilePass } from "./reconcile.js";

export interface Likes20mFigures {
  readonly likes: number;
  readonly posts: number;
  readonly loadSeconds: number;
  readonly migrateSeconds: number;
  readonly relationPartitions: number;
  readonly rebuildHotMs: number;
  readonly hotLikers: number;
  /** Posts rebuilt (every 100th and post 2), the likes they hold, and how long their rebuild took. */
  readonly sampledPosts: number;
  readonly sampledLikes: number;
  readonly rebuildSampleSeconds: number;
  readonly reconcileSeconds: number;
  readonly reconcileTargetsPerSecond: number;
  readonly reconcilePeakRssMb: number;
  readonly reconcileSummary: string;
  readonly persist: PersistFigures;
  readonly databaseMb: number;
  /** A user's newest 20 likes and a post's newest 20 likers, before the migration and after. */
  readonly pages: readonly PageFigures[];
}

export interface PageFigures {
  readonly page: string;
  readonly tables: "unpartitioned" | "partitioned";
  /** Mean and 99th percentile over 1,000 pages of distinct users or posts, warm. */
  readonly meanMs: number;
  readonly p99Ms: number;
  /** One page under EXPLAIN (ANALYZE, BUFFERS). */
  readonly planningMs: number;
  readonly executionMs: number;
  readonly sharedBuffers: number;
  readonly indexScans: number;
}

const posts = 1_000_000;
const users = 2_000_000;
const lastUnpartitioned = "0006_ranking_without_value_indexes";
/** Post p's likers in SQL: n_p of them, spread over the users by a stride prime to their count, so each is distinct. */
const likersOf = (p: string) => `GREATEST(2, 1900000 / (${p} + 18))`;
const likersOfPost = (p: number) => Math.max(2, Math.floor(1_900_000 / (p + 18)));
const sampleEvery = 100;

async function adminQuery(databaseUrl: string, statement: string): Promise<void> {
  const url = new URL(databaseUrl);
  url.pathname = "/postgres";
  const admin = new pgModule.Client({ connectionString: url.toString() });
  await admin.connect();
  try {
    await admin.query(statement);
  } finally {
    await admin.end();
  }
}

// The shapes of the store's page statements (member-page-store.ts, memberships and members), for one user or post.
const pageStatements = {
  "a user's likes": `SELECT l.created_at, l.target_id FROM likes l
    WHERE l.user_id = $1 AND l.target_type = 'post' AND (l.created_at, l.target_id) < ('infinity', 0) AND l.target_id <> ALL ('{}'::bigint[])
    ORDER BY l.created_at DESC, l.target_id DESC LIMIT 20`,
  "a post's likers": `SELECT l.created_at, l.user_id FROM likes l
    WHERE l.target_type = 'post' AND l.target_id = $1 AND (l.created_at, l.user_id) < ('infinity', 0)
    ORDER BY l.created_at DESC, l.user_id DESC LIMIT 20`,
};

interface PlanNode {
  "Node Type": string;
  Plans?: PlanNode[];
}

const countScans = (node: PlanNode): number =>
  (node["Node Type"].startsWith("Index") ? 1 : 0) + (node.Plans ?? []).reduce((n, child) => n + countScans(child), 0);

async function measurePages(sql: pg.Client, tables: PageFigures["tables"]): Promise<PageFigures[]> {
  const figures: PageFigures[] = [];
  for (const [page, statement] of Object.entries(pageStatements)) {
    // Ids spread over all users (or posts), the same ones before and after.
    const ids = Array.from({ length: 1_000 }, (_, i) => (page.startsWith("a user") ? ((i * 1_999) % users) + 1 : ((i * 997) % posts) + 1));
    for (const id of ids.slice(0, 100)) await sql.query(statement, [id]);
    const times: number[] = [];
    for (const id of ids) {
      const started = performance.now();
      await sql.query(statement, [id]);
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    const { rows } = await sql.query<{
      "QUERY PLAN": [{ Plan: PlanNode & { "Shared Hit Blocks": number; "Shared Read Blocks": number }; "Planning Time": number; "Execution Time": number }];
    }>(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${statement}`, [ids[500]]);
    const plan = rows[0]?.["QUERY PLAN"][0];
    figures.push({
      page,
      tables,
      meanMs: Number((times.reduce((a, b) => a + b, 0) / times.length).toFixed(3)),
      p99Ms: Number((times[Math.floor(times.length * 0.99)] ?? 0).toFixed(3)),
      planningMs: plan?.["Planning Time"] ?? 0,
      executionMs: plan?.["Execution Time"] ?? 0,
      sharedBuffers: (plan?.Plan["Shared Hit Blocks"] ?? 0) + (plan?.Plan["Shared Read Blocks"] ?? 0),
      indexScans: plan ? countScans(plan.Plan) : 0,
    });
  }
  return figures;
}

async function load(sql: pg.Client): Promise<void> {
  // The posts themselves, without which a rebuild finds no target and loads nothing.
  await sql.query(`INSERT INTO posts (id, author_id, title, body) SELECT p, 1 + p % ${users}, 'post ' || p, '' FROM generate_series(1, ${posts}) p`);
  const chunk = 50_000;
  for (let from = 1; from <= posts; from += chunk) {
    const to = Math.min(posts, from + chunk - 1);
    // Each like a year back at most, its relation version a microsecond stamp of epoch 1.
    await sql.query(`
      INSERT INTO likes (target_type, target_id, user_id, created_at)
      SELECT 'post', p, ((i - 1) * 7919 + p) % ${users} + 1, now() - ((p * 31 + i * 17) % 31536000) * interval '1 second'
      FROM generate_series(${from}, ${to}) p, LATERAL generate_series(1, ${likersOf("p")}) i`);
    await sql.query(`
      INSERT INTO relation_versions (target_type, target_id, relation, user_id, version, member, txid)
      SELECT 'post', p, 'like', ((i - 1) * 7919 + p) % ${users} + 1, 10000000000000000 + i, true, 1
      FROM generate_series(${from}, ${to}) p, LATERAL generate_series(1, ${likersOf("p")}) i`);
    await sql.query(`
      INSERT INTO counters (target_type, target_id, name, value)
      SELECT 'post', p, 'like', ${likersOf("p")} FROM generate_series(${from}, ${to}) p`);
    process.stderr.write(`  likes-20m: posts up to ${to.toLocaleString()} loaded\n`);
  }
  await sql.query("ANALYZE likes, relation_versions, counters");
}

export async function likes20m(redis: PrivateRedis, benchDatabaseUrl: string, amqpUrl: string, relationPartitions: number): Promise<Likes20mFigures> {
  const url = new URL(benchDatabaseUrl);
  url.pathname = `${url.pathname}_20m`;
  const databaseUrl = url.toString();
  const name = url.pathname.slice(1);
  await adminQuery(databaseUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await migrate(databaseUrl, { upTo: lastUnpartitioned });
  const sql = new pgModule.Client({ connectionString: databaseUrl });
  await sql.connect();
  try {
    await redis.client.flushall();
    process.stderr.write(`  likes-20m: loading ${posts.toLocaleString()} posts' likes, versions and counters (unpartitioned, as before 0007) ...\n`);
    const loadStarted = Date.now();
    await load(sql);
    const loadSeconds = (Date.now() - loadStarted) / 1000;
    const likes = Number((await sql.query<{ n: string }>("SELECT count(*) AS n FROM likes")).rows[0]?.n);
    const pagesBefore = await measurePages(sql, "unpartitioned");

    process.stderr.write(`  likes-20m: migrating (0007_partition_relations, ${relationPartitions} partitions) ...\n`);
    const migrateStarted = Date.now();
    await migrate(databaseUrl, { relationPartitions });
    const migrateSeconds = (Date.now() - migrateStarted) / 1000;
    const pagesAfter = await measurePages(sql, "partitioned");

    // Rebuilding all 1,000,000 posts would take most of an hour here: every 100th post is rebuilt
    // (post 2, 95,000 likers, first, to warm connections and plans; post 1, the hottest, timed alone),
    // and the time for all is extrapolated by posts and by likes.
    const sample: Target[] = [2, ...Array.from({ length: posts / sampleEvery }, (_, i) => i * sampleEvery + 1)].map((id) => ({ type: "post", id: BigInt(id) }));
    const sampleLikes = sample.reduce((n, t) => n + likersOfPost(Number(t.id)), 0);
    const rebuilt = await rebuildPosts(redis, databaseUrl, sample, "likes-20m");
    const pass = await reconcilePass(redis, databaseUrl, amqpUrl, "likes-20m");
    process.stderr.write("  likes-20m: persist beside the 20,000,000 rows ...\n");
    const persisted = await persist(redis, sql, databaseUrl, amqpUrl, true);
    const size = await sql.query<{ mb: string }>("SELECT pg_database_size(current_database()) / 1048576 AS mb");
    return {
      likes,
      posts,
      loadSeconds,
      migrateSeconds,
      relationPartitions,
      rebuildHotMs: rebuilt.firstMs,
      hotLikers: 100_000,
      sampledPosts: sample.length,
      sampledLikes: sampleLikes,
      rebuildSampleSeconds: rebuilt.allSeconds,
      reconcileSeconds: pass.seconds,
      reconcileTargetsPerSecond: pass.targetsPerSecond,
      reconcilePeakRssMb: pass.peakRssMb,
      reconcileSummary: pass.summary,
      persist: persisted,
      databaseMb: Number(size.rows[0]?.mb),
      pages: [...pagesBefore, ...pagesAfter],
    };
  } finally {
    await sql.end();
    await adminQuery(databaseUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  }
}
