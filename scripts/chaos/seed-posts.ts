// Posts with likes written straight into a case's database, as the pipeline
// would have left them (likes, their applied versions, counters, the hot
// ranking's buckets), the way the bench loads its data set: thousands of posts
// through the API would take most of a case's time. Redis knows none of them
// until they are read: each first read rebuilds its post from PostgreSQL.
import pg from "pg";

export interface SeededPosts {
  /** In the order written; likes fall off along it. */
  readonly postIds: readonly string[];
  readonly likes: number;
}

/** Likers of the k-th post: the bench's Zipf–Mandelbrot skew, n_k ∝ 1/(k + 14.3). */
const zipfOffset = 14.3;

/**
 * Writes `posts` posts by `users` new users (who like them: the first post gets
 * `firstPostLikes` likes, later ones fewer), named after `tag`.
 */
export async function seedPosts(
  databaseUrl: string,
  options: { readonly tag: string; readonly users: number; readonly posts: number; readonly firstPostLikes: number },
): Promise<SeededPosts> {
  const { tag, users, posts, firstPostLikes } = options;
  // Liker j of a post is user (start + j × stride) mod users: distinct while the stride is coprime to the count.
  const stride = 7_919;
  if (users % stride === 0 || firstPostLikes > users) throw new Error(`seedPosts needs a user count coprime to ${stride} and at least the first post's likes`);
  const sql = new pg.Client({ connectionString: databaseUrl });
  await sql.connect();
  try {
    await sql.query("BEGIN");
    const userRows = await sql.query<{ id: string }>(
      `INSERT INTO users (username, email, password_hash, created_at)
       SELECT $1 || '_s' || g, $1 || '_s' || g || '@chaos.example', 'scrypt$00$00', now() - interval '31 days'
       FROM generate_series(1, $2::int) g RETURNING id::text`,
      [tag, users],
    );
    const userIds = userRows.rows.map((r) => r.id);
    const postRows = await sql.query<{ id: string }>(
      `INSERT INTO posts (author_id, title, body, created_at)
       SELECT ($1::bigint[])[1 + (g * 104729) % $2::int], 'Seeded post ' || g, 'A post of ${tag}, written before the case.', now() - interval '30 days' + g * interval '1 minute'
       FROM generate_series(1, $3::int) g ORDER BY g RETURNING id::text`,
      [userIds, users, posts],
    );
    const postIds = postRows.rows.map((r) => r.id);
    const scale = firstPostLikes * (1 + zipfOffset);
    const liked = await sql.query(
      `WITH p AS (SELECT id, row_number() OVER (ORDER BY id) AS k, created_at FROM posts WHERE id = ANY($1::bigint[])),
            n AS (SELECT p.*, greatest(1, least($3::int, round($4::float8 / (p.k + ${zipfOffset}))))::int AS likers FROM p)
       INSERT INTO likes (target_type, target_id, user_id, created_at)
       SELECT 'post', n.id, ($2::bigint[])[1 + ((n.k * 31 + j * ${stride}) % $3::int)], n.created_at + (now() - n.created_at) * ((j + 0.5) / n.likers)
       FROM n, generate_series(0, n.likers - 1) j`,
      [postIds, userIds, users, scale],
    );
    await sql.query(
      `INSERT INTO relation_versions (target_type, target_id, relation, user_id, version, member)
       SELECT target_type, target_id, 'like', user_id, floor(extract(epoch FROM created_at) * 1000000), true
       FROM likes WHERE target_type = 'post' AND target_id = ANY($1::bigint[])`,
      [postIds],
    );
    await sql.query(
      `INSERT INTO counters (target_type, target_id, name, value)
       SELECT 'post', target_id, 'like', count(*) FROM likes WHERE target_type = 'post' AND target_id = ANY($1::bigint[]) GROUP BY target_id
       UNION ALL SELECT 'user', p.author_id, 'likesReceived', count(*) FROM likes l JOIN posts p ON p.id = l.target_id
         WHERE l.target_type = 'post' AND p.id = ANY($1::bigint[]) GROUP BY p.author_id
       UNION ALL SELECT 'user', author_id, 'posts', count(*) FROM posts WHERE id = ANY($1::bigint[]) GROUP BY author_id`,
      [postIds],
    );
    // The hot ranking's buckets, as persist batches would have left them (the bench's data set does the same).
    await sql.query(
      `INSERT INTO like_buckets (span, bucket, target_id, likes)
       SELECT s.span, to_timestamp(floor(extract(epoch FROM l.created_at) / s.seconds) * s.seconds), l.target_id, count(*)
       FROM likes l CROSS JOIN (VALUES ('m5', 300), ('h1', 3600), ('h6', 21600)) AS s(span, seconds)
       WHERE l.target_type = 'post' AND l.target_id = ANY($1::bigint[]) AND l.created_at > now() - interval '8 days'
       GROUP BY 1, 2, 3`,
      [postIds],
    );
    await sql.query("COMMIT");
    await sql.query("ANALYZE users, posts, likes, relation_versions, counters, like_buckets");
    return { postIds, likes: liked.rowCount ?? 0 };
  } catch (error) {
    await sql.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    await sql.end();
  }
}
