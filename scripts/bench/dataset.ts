// The benchmark's data: what a like service holds after a while in production,
// not an empty or repeating set. Users who like, many more who have liked
// nothing, posts whose likes follow a Zipf–Mandelbrot skew n_k ∝ 1/(k + 14.3)
// (post 1 has every liker, post 10,000 about 15). Rows go straight into
// PostgreSQL with COPY; Redis is then warmed through the service's own rebuild,
// exactly as a new Redis would be filled in production.
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type pg from "pg";
import { from as copyFrom } from "pg-copy-streams";

export interface DatasetShape {
  readonly name: string;
  /** Users 1..likers like things; users after them have liked nothing. */
  readonly likers: number;
  readonly idleUsers: number;
  readonly posts: number;
  /** Likers of post k: round(scale / (k + 14.3)), at least 1; post 1 gets every liker. */
  readonly scale: number;
}

export const zipfOffset = 14.3;

/** 10,000 likers, 200,000 idle users, 10,000 posts, about 1,000,000 likes. */
export const realistic: DatasetShape = { name: "realistic", likers: 10_000, idleUsers: 200_000, posts: 10_000, scale: 10_000 * (1 + zipfOffset) };

/** A tenth of everything, for development runs (`--quick`); its figures are not those of docs/performance.md. */
export const quick: DatasetShape = { name: "quick", likers: 1_000, idleUsers: 20_000, posts: 1_000, scale: 1_000 * (1 + zipfOffset) };

export function likersOf(shape: DatasetShape, post: number): number {
  return Math.min(shape.likers, Math.max(1, Math.round(shape.scale / (post + zipfOffset))));
}

export interface Dataset {
  readonly shape: DatasetShape;
  readonly likes: number;
  /** The users who like things: feed viewers. */
  readonly likerIds: readonly bigint[];
  /** The users who have liked nothing: the likers of the like scenarios. */
  readonly idleIds: readonly bigint[];
  readonly postIds: readonly bigint[];
  authorOf(post: bigint): bigint;
}

/** mulberry32: a small seeded generator, so every run loads the same data. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Streams rows made by `rows` into `COPY table (columns) FROM STDIN`, a chunk of lines at a time. */
async function copyRows(sql: pg.Client, table: string, columns: readonly string[], rows: () => Generator<string>): Promise<void> {
  async function* chunks() {
    let chunk = "";
    for (const line of rows()) {
      chunk += line + "\n";
      if (chunk.length > 1 << 20) {
        yield chunk;
        chunk = "";
      }
    }
    if (chunk) yield chunk;
  }
  await pipeline(Readable.from(chunks()), sql.query(copyFrom(`COPY ${table} (${columns.join(", ")}) FROM STDIN`)));
}

const dayMs = 86_400_000;

/**
 * Empties the bench database and loads the data set. Post k is written by one of
 * the likers and created k minutes after the first; each like falls between its
 * post's creation and now, with a version (microseconds) at the same moment, as
 * the pipeline would have applied it.
 */
export async function loadDataset(sql: pg.Client, shape: DatasetShape, progress: (done: number, total: number) => void = () => {}): Promise<Dataset> {
  const random = seededRandom(20261124);
  const users = shape.likers + shape.idleUsers;
  const now = Date.now();
  const start = now - 30 * dayMs;
  const postCreated = (k: number) => start + k * 60_000;
  const authorOf = (post: bigint) => 1n + ((post * 7_919n) % BigInt(shape.likers));
  // Liker j of post k: distinct users from a random start with a stride coprime to the liker count.
  const stride = 7_919;
  if (shape.likers % stride === 0) throw new Error("the liker count must be coprime to the stride");
  const likeStarts = Array.from({ length: shape.posts }, () => Math.floor(random() * shape.likers));
  const likeTimes = Array.from({ length: shape.posts }, () => random());
  let likes = 0;
  for (let k = 1; k <= shape.posts; k++) likes += likersOf(shape, k);

  await sql.query("SET synchronous_commit = off");
  await sql.query(
    "TRUNCATE users, posts, comments, likes, collects, follows, relation_versions, view_totals, target_epochs, counters, like_buckets RESTART IDENTITY",
  );
  await copyRows(sql, "users", ["id", "username", "email", "password_hash", "created_at"], function* () {
    const created = new Date(start - dayMs).toISOString();
    for (let u = 1; u <= users; u++) yield `${u}\tbench_${u}\tbench_${u}@example.com\tscrypt$00$00\t${created}`;
  });
  await copyRows(sql, "posts", ["id", "author_id", "title", "body", "created_at"], function* () {
    for (let k = 1; k <= shape.posts; k++) {
      yield `${k}\t${authorOf(BigInt(k))}\tPost ${k}\tBody of post ${k}, a few words long.\t${new Date(postCreated(k)).toISOString()}`;
    }
  });
  // Likes and their applied versions: one pass each over the same deterministic pairs.
  function* pairs(): Generator<[post: number, user: number, atMs: number]> {
    let done = 0;
    for (let k = 1; k <= shape.posts; k++) {
      const n = likersOf(shape, k);
      const from = postCreated(k);
      const span = now - from - 1_000;
      for (let j = 0; j < n; j++) {
        const user = 1 + ((likeStarts[k - 1]! + j * stride) % shape.likers);
        // Spread over the post's life, deterministically per (post, like).
        const at = from + Math.floor(((likeTimes[k - 1]! + j / n) % 1) * span);
        yield [k, user, at];
      }
      done += n;
      if (k % 500 === 0 || k === shape.posts) progress(done, likes);
    }
  }
  await copyRows(sql, "likes", ["target_type", "target_id", "user_id", "created_at"], function* () {
    for (const [post, user, at] of pairs()) yield `post\t${post}\t${user}\t${new Date(at).toISOString()}`;
  });
  await copyRows(sql, "relation_versions", ["target_type", "target_id", "relation", "user_id", "version", "member"], function* () {
    for (const [post, user, at] of pairs()) yield `post\t${post}\tlike\t${user}\t${at * 1000}\tt`;
  });
  await sql.query(`
    INSERT INTO counters (target_type, target_id, name, value)
    SELECT 'post', target_id, 'like', count(*) FROM likes GROUP BY target_id
    UNION ALL SELECT 'user', p.author_id, 'likesReceived', count(*) FROM likes l JOIN posts p ON p.id = l.target_id GROUP BY p.author_id
    UNION ALL SELECT 'user', author_id, 'posts', count(*) FROM posts GROUP BY author_id`);
  // The hot ranking's buckets, as the persist batches would have left them (and as migration 0005 backfills).
  await sql.query(`
    INSERT INTO like_buckets (span, bucket, target_id, likes)
    SELECT s.span, to_timestamp(floor(extract(epoch FROM l.created_at) / s.seconds) * s.seconds), l.target_id, count(*)
    FROM likes l CROSS JOIN (VALUES ('m5', 300), ('h1', 3600), ('h6', 21600)) AS s(span, seconds)
    WHERE l.target_type = 'post' AND l.created_at > now() - interval '8 days'
    GROUP BY 1, 2, 3`);
  await sql.query("SELECT setval(pg_get_serial_sequence('users', 'id'), $1), setval(pg_get_serial_sequence('posts', 'id'), $2)", [users, shape.posts]);
  // Vacuumed now, so autovacuum does not wake up on a million new rows during a measurement.
  await sql.query("VACUUM (ANALYZE) users, posts, likes, relation_versions, counters, like_buckets");

  const ids = (from: number, count: number) => Array.from({ length: count }, (_, i) => BigInt(from + i));
  return {
    shape,
    likes,
    likerIds: ids(1, shape.likers),
    idleIds: ids(shape.likers + 1, shape.idleUsers),
    postIds: ids(1, shape.posts),
    authorOf,
  };
}
