// 0007_partition_relations on a database an older release left populated: every row of
// likes, collects, follows and relation_versions survives, in tables hash-partitioned by
// target into the count RELATION_PARTITIONS asked for. Each case migrates a database of its own.
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { migrate } from "../../../../src/stores/postgres/migrate.js";
import { testConfig } from "../../../support/env.js";

const lastUnpartitioned = "0006_ranking_without_value_indexes";
const tables = ["likes", "collects", "follows", "relation_versions"] as const;
type Table = (typeof tables)[number];
const partitionKeys = { likes: "target_id", collects: "target_id", follows: "followee_id", relation_versions: "target_id" };
const created: string[] = [];

function databaseUrl(suffix: string): string {
  const url = new URL(testConfig().databaseUrl);
  url.pathname = `${url.pathname}_${suffix}`;
  return url.toString();
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

async function dropDatabase(url: string): Promise<void> {
  const admin = new URL(url);
  const name = admin.pathname.slice(1);
  admin.pathname = "/postgres";
  await withClient(admin.toString(), (c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
}

/** A database migrated as far as 0006, holding rows in all four tables (follows and a few thousand of each). */
async function populatedAt0006(suffix: string): Promise<string> {
  const url = databaseUrl(suffix);
  await dropDatabase(url);
  created.push(url);
  await migrate(url, { upTo: lastUnpartitioned });
  await withClient(url, async (c) => {
    await c.query(`
      INSERT INTO likes (target_type, target_id, user_id, created_at)
      SELECT CASE WHEN t % 5 = 0 THEN 'comment' ELSE 'post' END, t, u, timestamptz '2026-01-01' + (t * 1000 + u) * interval '1 second'
      FROM generate_series(1, 200) t, generate_series(1, 1 + t % 37) u`);
    await c.query(`
      INSERT INTO collects (target_type, target_id, user_id) SELECT 'post', t, u FROM generate_series(1, 150) t, generate_series(1, 1 + t % 11) u`);
    await c.query(`
      INSERT INTO follows (followee_id, follower_id, created_at)
      SELECT f, u, timestamptz '2026-02-01' + u * interval '1 minute' FROM generate_series(1, 120) f, generate_series(1, 1 + f % 23) u WHERE u <> f`);
    await c.query(`
      INSERT INTO relation_versions (target_type, target_id, relation, user_id, version, member, txid)
      SELECT target_type, target_id, 'like', user_id, 10000000000000000 + target_id * 1000 + user_id, true, 42 FROM likes
      UNION ALL SELECT target_type, target_id, 'collect', user_id, 10000000000000001, user_id % 2 = 0, NULL FROM collects
      UNION ALL SELECT 'user', followee_id, 'follow', follower_id, 20000000000000000 + follower_id, true, 7 FROM follows`);
  });
  return url;
}

/** Every row of every relation table, as text in one stable order. */
const rowsOf = (url: string) =>
  withClient(url, async (c) => {
    const rows = {} as Record<Table, string[]>;
    for (const table of tables) {
      const { rows: found } = await c.query<{ row: string }>(`SELECT t::text AS row FROM ${table} t ORDER BY 1`);
      rows[table] = found.map((r) => r.row);
    }
    return rows;
  });

interface Partitioning {
  kind: string;
  strategy: string | null;
  key: string | null;
  partitions: number;
  primaryKey: string | null;
  indexes: string[];
}

const partitioningOf = (url: string) =>
  withClient(url, async (c) => {
    const found = {} as Record<Table, Partitioning>;
    for (const table of tables) {
      const { rows } = await c.query<Partitioning>(
        `SELECT c.relkind AS kind, p.partstrat AS strategy,
           (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum = p.partattrs[0]) AS key,
           (SELECT count(*)::int FROM pg_inherits i WHERE i.inhparent = c.oid) AS partitions,
           (SELECT pg_get_constraintdef(k.oid) FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'p') AS "primaryKey",
           ARRAY(SELECT x.relname::text FROM pg_index ix JOIN pg_class x ON x.oid = ix.indexrelid WHERE ix.indrelid = c.oid ORDER BY 1) AS indexes
         FROM pg_class c LEFT JOIN pg_partitioned_table p ON p.partrelid = c.oid
         WHERE c.relname = $1 AND c.relnamespace = 'public'::regnamespace`,
        [table],
      );
      found[table] = rows[0] as Partitioning;
    }
    return found;
  });

afterAll(async () => {
  for (const url of created) await dropDatabase(url);
});

describe("partitioning the relation tables (0007_partition_relations)", () => {
  it("when a populated database is migrated with no count given, then every row is kept in 16 hash partitions by target", async () => {
    const url = await populatedAt0006("partition_default");
    const before = await rowsOf(url);
    expect(Object.values(before).map((rows) => rows.length)).toEqual([3_650, 893, 1_378, 5_921]);

    expect(await migrate(url)).toEqual(["0007_partition_relations"]);

    expect(await rowsOf(url)).toEqual(before);
    const partitioning = await partitioningOf(url);
    for (const table of tables) {
      expect(partitioning[table]).toMatchObject({ kind: "p", strategy: "h", key: partitionKeys[table], partitions: 16 });
    }
    expect(partitioning.likes).toMatchObject({
      primaryKey: "PRIMARY KEY (target_type, target_id, user_id)",
      indexes: ["likes_pkey", "likes_target_type_target_id_created_at_idx", "likes_user_id_created_at_idx"],
    });
    expect(partitioning.collects).toMatchObject({
      primaryKey: "PRIMARY KEY (target_type, target_id, user_id)",
      indexes: ["collects_pkey", "collects_target_type_target_id_created_at_idx", "collects_user_id_created_at_idx"],
    });
    expect(partitioning.follows).toMatchObject({
      primaryKey: "PRIMARY KEY (followee_id, follower_id)",
      indexes: ["follows_followee_id_created_at_idx", "follows_follower_id_created_at_idx", "follows_pkey"],
    });
    expect(partitioning.relation_versions).toMatchObject({
      primaryKey: "PRIMARY KEY (target_type, target_id, relation, user_id)",
      indexes: ["relation_versions_pkey"],
    });
  });

  it("when RELATION_PARTITIONS asks for 5, then the tables have 5 partitions, each target's rows in one, and new rows still land", async () => {
    const url = await populatedAt0006("partition_five");
    const before = await rowsOf(url);

    await migrate(url, { relationPartitions: 5 });

    expect(await rowsOf(url)).toEqual(before);
    const partitioning = await partitioningOf(url);
    expect(tables.map((t) => partitioning[t].partitions)).toEqual([5, 5, 5, 5]);
    await withClient(url, async (c) => {
      const spread = await c.query<{ partitions: number; split: number }>(
        `SELECT count(DISTINCT tableoid)::int AS partitions,
           (SELECT count(*)::int FROM (SELECT target_id FROM likes GROUP BY target_id HAVING count(DISTINCT tableoid) > 1) s) AS split
         FROM likes`,
      );
      expect(spread.rows[0]).toEqual({ partitions: 5, split: 0 });
      // The persist batch's conflict targets are the primary keys, which partitioned tables accept.
      await c.query(`INSERT INTO likes (target_type, target_id, user_id) VALUES ('post', 1, 1), ('post', 999, 1) ON CONFLICT DO NOTHING`);
      await c.query(
        `INSERT INTO relation_versions (target_type, target_id, relation, user_id, version, member) VALUES ('post', 1, 'like', 1, 1, false)
         ON CONFLICT (target_type, target_id, relation, user_id) DO UPDATE SET version = EXCLUDED.version WHERE relation_versions.version < EXCLUDED.version`,
      );
      const { rows } = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM likes`);
      expect(rows[0]?.n).toBe(before.likes.length + 1);
    });
  });

  it("when the count is out of range, then the migration fails whole and the old tables keep their rows", async () => {
    const url = await populatedAt0006("partition_refused");
    const before = await rowsOf(url);

    await expect(migrate(url, { relationPartitions: 0 })).rejects.toThrow(/must be a whole number from 1 to 1024/);

    expect(await rowsOf(url)).toEqual(before);
    const partitioning = await partitioningOf(url);
    expect(tables.map((t) => [partitioning[t].kind, partitioning[t].partitions])).toEqual(tables.map(() => ["r", 0]));
  });
});
