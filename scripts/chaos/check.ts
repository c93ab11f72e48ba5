// After a case has settled (settle.ts): hold Redis and PostgreSQL (and what the
// API shows) against the history of acknowledged answers.
//
// Read straight from the stores, not through the service's own stores, so a
// bug there cannot hide itself: Redis membership is every shard of a post
// (`lk:{p}:post:<id>:*`, see src/stores/redis/keys.ts), its counts the counter
// hash `cnt:{p}:<type>:<id>`; PostgreSQL is the operators' tables `likes` and
// `counters`.
import { Cluster, type Redis } from "ioredis";

/** The check's client of the case's Redis: one server, or a cluster. */
export type RedisClient = Redis | Cluster;
import type pg from "pg";
import { createRedisKeys } from "../../src/stores/redis/keys.js";
import type { Cast, CastUser, Post } from "./cast.js";
import type { Endpoint } from "./endpoint.js";
import type { PairHistory } from "./history.js";

export interface Verdict {
  /** Pairs whose final state a store does not hold (or the stores disagree on). */
  readonly lost: readonly string[];
  /** Counts counted twice: a member held in two shards, a counter above the members (or rows) it counts. */
  readonly doubled: readonly string[];
  /** Counters that disagree with their members or with the other store. */
  readonly drift: readonly string[];
  /** Pairs whose last operation had no answer and may have ended either way. */
  readonly unknown: number;
  /** Acknowledged answers whose `changed` contradicts the state known before. */
  readonly misanswered: readonly string[];
  /** Lost pairs whose state was acknowledged before Redis was back from its crash (a case that expects to lose those). */
  readonly expectedLost: number;
  readonly expectedMisanswered: number;
  /** Units of `doubled` (a description may stand for several extra counts). */
  readonly doubledCount: number;
}

export interface RedisTarget {
  /** Whether Redis holds the target at all (its counter hash); a missing one is rebuilt from PostgreSQL on use. */
  readonly held: boolean;
  readonly counters: Readonly<Record<string, string>>;
  /** Each member with the number of shards holding it. */
  readonly members: ReadonlyMap<string, number>;
}

export async function readRedisPost(redis: RedisClient, partitions: number, postId: string): Promise<RedisTarget> {
  const keys = createRedisKeys(partitions);
  const target = { type: "post" as const, id: BigInt(postId) };
  const counters = await redis.hgetall(keys.counters(target));
  const members = new Map<string, number>();
  const pattern = `lk:{${keys.partitionOf(target)}}:post:${postId}:*`;
  // A cluster's SCAN walks one node: every master's, of which the post's slot is on one.
  for (const node of redis instanceof Cluster ? redis.nodes("master") : [redis]) {
    let cursor = "0";
    do {
      const [next, found] = await node.scan(cursor, "MATCH", pattern, "COUNT", 1000);
      cursor = next;
      for (const shard of found) for (const m of await node.smembers(shard)) members.set(m, (members.get(m) ?? 0) + 1);
    } while (cursor !== "0");
  }
  return { held: Object.keys(counters).length > 0, counters, members };
}

async function readRedisUser(redis: RedisClient, partitions: number, userId: string): Promise<RedisTarget> {
  const counters = await redis.hgetall(createRedisKeys(partitions).counters({ type: "user", id: BigInt(userId) }));
  return { held: Object.keys(counters).length > 0, counters, members: new Map() };
}

const postsQuery = `query($ids: [ID!]!) { posts(ids: $ids) { id counts { likes } author { id counts { likesReceived } } } }`;

export interface CheckInput {
  readonly redis: RedisClient;
  readonly partitions: number;
  readonly sql: pg.Client;
  readonly api: Endpoint;
  readonly cast: Cast;
  readonly pairs: ReadonlyMap<string, PairHistory>;
  /** Posts a case made for its own measurement, with likes that are not the load's: the case checks them. */
  readonly casePosts?: ReadonlySet<string>;
  /**
   * For a case expected to lose what Redis held at a crash: from the crash to
   * Redis being back (ms into the load). A state acknowledged before it was back
   * may be lost, and an answer given after the crash on such a state may be wrong.
   */
  readonly expectedLoss?: { readonly crashMs: number; readonly backMs: number };
}

/** What the check found so far, filled in by its steps. */
interface Findings {
  readonly lost: string[];
  readonly doubled: string[];
  readonly drift: string[];
  doubledCount: number;
  expectedLost: number;
}

/** PostgreSQL's likes of the load's posts, and its counters. */
interface Database {
  readonly likes: ReadonlyMap<string, ReadonlySet<string>>;
  counter(type: string, id: string, name: string): number;
}

async function readDatabase(input: CheckInput, found: Findings): Promise<Database> {
  const { sql, cast } = input;
  const rows = await sql.query<{ target_id: string; user_id: string }>("SELECT target_id::text, user_id::text FROM likes WHERE target_type = 'post'");
  const inDatabase = new Map<string, Set<string>>(cast.posts.map((p) => [p.id, new Set<string>()]));
  for (const row of rows.rows) {
    const set = inDatabase.get(row.target_id);
    if (!set && input.casePosts?.has(row.target_id)) continue;
    if (!set) found.lost.push(`PostgreSQL holds a like on post ${row.target_id}, which the load never touched (user ${row.user_id})`);
    else set.add(row.user_id);
  }
  const counterRows = await sql.query<{ target_type: string; target_id: string; name: string; value: string }>(
    "SELECT target_type, target_id::text, name, value::text FROM counters WHERE (target_type = 'post' AND name = 'like') OR (target_type = 'user' AND name = 'likesReceived')",
  );
  const counter = (type: string, id: string, name: string) =>
    Number(counterRows.rows.find((r) => r.target_type === type && r.target_id === id && r.name === name)?.value ?? 0);
  return { likes: inDatabase, counter };
}

/** One pair's final state in both stores against what its history allows. */
function checkPair(input: CheckInput, userId: string, postId: string, r: RedisTarget, inDb: boolean, found: Findings): void {
  const pair = input.pairs.get(`${userId}:${postId}`) as PairHistory;
  const allowed = pair.allowedFinal();
  const occurrences = r.members.get(userId) ?? 0;
  const inRedis = occurrences > 0;
  const problems: string[] = [];
  if (!allowed.has(inDb)) problems.push(`PostgreSQL ${inDb ? "liked" : "not liked"}`);
  if (r.held && !allowed.has(inRedis)) problems.push(`Redis ${inRedis ? "liked" : "not liked"}`);
  if (r.held && inRedis !== inDb && allowed.size > 1) problems.push(`Redis ${inRedis ? "liked" : "not liked"} but PostgreSQL ${inDb ? "liked" : "not liked"}`);
  if (problems.length > 0) {
    const expected = allowed.size > 1 ? "either" : allowed.has(true) ? "liked" : "not liked";
    found.lost.push(`user ${userId} post ${postId}: expected ${expected}; ${problems.join(", ")}; history: ${pair.describe()}`);
    // Lost with Redis: a state acknowledged before Redis came back, or sent before it died (the old Redis may have
    // run it and answered it, later than the restart when the API was slow to pass the answer on).
    const loss = input.expectedLoss;
    const sentToLostRedis = loss !== undefined && (pair.lastCertainMs < loss.backMs || pair.lastCertainSentMs < loss.crashMs);
    if (sentToLostRedis && (!r.held || inRedis === inDb)) found.expectedLost++;
  }
  if (occurrences > 1) {
    found.doubled.push(`user ${userId} is in ${occurrences} membership shards of post ${postId}`);
    found.doubledCount += occurrences - 1;
  }
}

function checkPostCounters(postId: string, r: RedisTarget, rows: number, dbCount: number, found: Findings): void {
  if (dbCount !== rows) found.drift.push(`post ${postId}: PostgreSQL counter ${dbCount}, ${rows} rows in likes`);
  if (dbCount > rows) {
    found.doubled.push(`post ${postId}: PostgreSQL counter ${dbCount} above its ${rows} rows`);
    found.doubledCount += dbCount - rows;
  }
  if (r.held) {
    const count = Number(r.counters.like ?? 0);
    if (count !== r.members.size) found.drift.push(`post ${postId}: Redis count ${count}, ${r.members.size} members`);
    if (count !== dbCount) found.drift.push(`post ${postId}: Redis count ${count}, PostgreSQL counter ${dbCount}`);
    if (count > r.members.size) {
      found.doubled.push(`post ${postId}: Redis count ${count} above its ${r.members.size} members`);
      found.doubledCount += count - r.members.size;
    }
  }
}

/** Checks a load post's pairs and counters; answers the likes it really holds: Redis's members where Redis holds it, else PostgreSQL's rows. */
async function checkPost(input: CheckInput, db: Database, post: Post, found: Findings): Promise<number> {
  const r = await readRedisPost(input.redis, input.partitions, post.id);
  const d = db.likes.get(post.id) as ReadonlySet<string>;
  const likerIds = new Set(input.cast.likers.map((l) => l.id));
  for (const userId of likerIds) checkPair(input, userId, post.id, r, d.has(userId), found);
  for (const userId of d) if (!likerIds.has(userId)) found.lost.push(`PostgreSQL holds a like of post ${post.id} by user ${userId}, who never liked anything`);
  for (const userId of r.members.keys())
    if (!likerIds.has(userId)) found.lost.push(`Redis holds a like of post ${post.id} by user ${userId}, who never liked anything`);
  checkPostCounters(post.id, r, d.size, db.counter("post", post.id, "like"), found);
  return r.held ? r.members.size : d.size;
}

async function checkAuthor(input: CheckInput, db: Database, author: CastUser, redisLikes: ReadonlyMap<string, number>, found: Findings): Promise<void> {
  const own = input.cast.posts.filter((p) => p.authorId === author.id);
  const sum = own.reduce((s, p) => s + db.counter("post", p.id, "like"), 0);
  const rows = own.reduce((s, p) => s + (db.likes.get(p.id)?.size ?? 0), 0);
  const dbReceived = db.counter("user", author.id, "likesReceived");
  if (dbReceived !== sum) found.drift.push(`author ${author.id}: PostgreSQL likesReceived ${dbReceived}, their posts' likes sum to ${sum}`);
  if (dbReceived > rows) {
    found.doubled.push(`author ${author.id}: PostgreSQL likesReceived ${dbReceived} above the ${rows} rows of likes of their posts`);
    found.doubledCount += dbReceived - rows;
  }
  const r = await readRedisUser(input.redis, input.partitions, author.id);
  if (r.held) {
    const received = Number(r.counters.likesReceived ?? 0);
    const held = own.reduce((s, p) => s + (redisLikes.get(p.id) ?? 0), 0);
    if (received !== dbReceived) found.drift.push(`author ${author.id}: Redis likesReceived ${received}, PostgreSQL ${dbReceived}`);
    if (received > held) {
      found.doubled.push(`author ${author.id}: Redis likesReceived ${received} above the ${held} likes their posts hold in Redis`);
      found.doubledCount += received - held;
    }
  }
}

/** What users see: the API's counts (read from Redis, rebuilt from PostgreSQL where Redis lost a target). */
async function checkShown(input: CheckInput, db: Database, found: Findings): Promise<void> {
  type Shown = { posts: ({ id: string; counts: { likes: number }; author: { id: string; counts: { likesReceived: number } } } | null)[] };
  const postIds = input.cast.posts.map((p) => p.id);
  const shown = await input.api.must<Shown>(postsQuery, { ids: postIds });
  for (const [i, post] of shown.posts.entries()) {
    const id = postIds[i] as string;
    if (!post) {
      found.drift.push(`post ${id}: the API does not find it`);
      continue;
    }
    const dbCount = db.counter("post", id, "like");
    if (post.counts.likes !== dbCount) found.drift.push(`post ${id}: the API shows ${post.counts.likes} likes, PostgreSQL ${dbCount}`);
    const dbReceived = db.counter("user", post.author.id, "likesReceived");
    if (post.author.counts.likesReceived !== dbReceived)
      found.drift.push(`author ${post.author.id}: the API shows likesReceived ${post.author.counts.likesReceived}, PostgreSQL ${dbReceived}`);
  }
}

/** The answers of the history: pairs whose end is unknown, and acknowledged answers that contradict it. */
function checkAnswers(input: CheckInput): Pick<Verdict, "unknown" | "misanswered" | "expectedMisanswered"> {
  let unknown = 0;
  const misanswered: string[] = [];
  let expectedMisanswered = 0;
  for (const pair of input.pairs.values()) {
    if (pair.allowedFinal().size > 1) unknown++;
    for (const op of pair.misanswered()) {
      misanswered.push(
        `user ${pair.userId} post ${pair.postId}: ${op.kind} at ${(op.startMs / 1000).toFixed(2)} s answered changed=${String(op.outcome.kind === "acknowledged" && op.outcome.changed)}, expected ${String(op.expectedChanged)}; history: ${pair.describe(op)}`,
      );
      if (input.expectedLoss && op.priorCertainMs < input.expectedLoss.backMs && op.endMs >= input.expectedLoss.crashMs) expectedMisanswered++;
    }
  }
  return { unknown, misanswered, expectedMisanswered };
}

export async function verify(input: CheckInput): Promise<Verdict> {
  const found: Findings = { lost: [], doubled: [], drift: [], doubledCount: 0, expectedLost: 0 };
  const db = await readDatabase(input, found);
  const redisLikes = new Map<string, number>();
  for (const post of input.cast.posts) redisLikes.set(post.id, await checkPost(input, db, post, found));
  for (const author of input.cast.authors) await checkAuthor(input, db, author, redisLikes, found);
  await checkShown(input, db, found);
  const { unknown, misanswered, expectedMisanswered } = checkAnswers(input);
  const { lost, doubled, drift, expectedLost, doubledCount } = found;
  return { lost, doubled: [...new Set(doubled)], drift: [...new Set(drift)], unknown, misanswered, expectedLost, expectedMisanswered, doubledCount };
}
