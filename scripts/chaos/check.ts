// After a case: wait until the pipeline has nothing left in hand, then hold
// Redis and PostgreSQL (and what the API shows) against the history of
// acknowledged answers.
//
// Read straight from the stores, not through the service's own stores, so a
// bug there cannot hide itself: Redis membership is every shard of a post
// (`lk:{p}:post:<id>:*`, see src/stores/redis/keys.ts), its counts the counter
// hash `cnt:{p}:<type>:<id>`; PostgreSQL is the operators' tables `likes` and
// `counters`.
import { setTimeout as sleep } from "node:timers/promises";
import { Cluster, type Redis } from "ioredis";

/** The check's client of the case's Redis: one server, or a cluster. */
export type RedisClient = Redis | Cluster;
import type pg from "pg";
import { createRedisKeys } from "../../src/stores/redis/keys.js";
import type { PairHistory } from "./history.js";
import type { Cast, Endpoint, ViewReports } from "./load.js";
import type { RabbitVhost } from "./rabbitmq-vhost.js";

export interface Settling {
  readonly settled: boolean;
  readonly seconds: number;
  /** What was left when it did not settle. */
  readonly left: string;
  /** Messages in the dead-letter queue. */
  readonly deadLettered: number;
}

/** Entries the outbox streams hold now. */
export async function outboxLength(redis: RedisClient, streams: readonly string[]): Promise<number> {
  if (redis instanceof Cluster) {
    // A cluster's pipeline takes keys of one slot only; ioredis batches these by node itself.
    const lengths = await Promise.all(streams.map((s) => redis.xlen(s).catch(() => 0)));
    return lengths.reduce((sum, n) => sum + n, 0);
  }
  const lengths = (await redis.pipeline(streams.map((s) => ["xlen", s])).exec()) ?? [];
  return lengths.reduce((sum, [error, n]) => sum + (error ? 0 : Number(n)), 0);
}

/**
 * Waits until no outbox entry is left in Redis and no message in the case's
 * queues (ready or unacknowledged), seen twice in a row: a relayed change is in
 * a queue before it leaves the outbox, and leaves its queue once committed.
 */
export async function settle(redis: RedisClient, partitions: number, vhost: RabbitVhost, prefix: string, timeoutMs: number): Promise<Settling> {
  const started = Date.now();
  const streams = createRedisKeys(partitions).outboxes();
  let calm = 0;
  let left = "";
  let deadLettered = 0;
  while (Date.now() - started < timeoutMs) {
    try {
      const outbox = await outboxLength(redis, streams);
      const queues = (await vhost.queues()).filter((q) => q.name.startsWith(`${prefix}.`));
      deadLettered = queues.find((q) => q.name === `${prefix}.dead`)?.messages ?? 0;
      const inQueues = queues.filter((q) => q.name !== `${prefix}.dead`).reduce((sum, q) => sum + q.messages, 0);
      left = `${outbox} outbox entries, ${inQueues} messages in queues (${queues.map((q) => `${q.name}=${q.messages}`).join(" ")})`;
      calm = outbox === 0 && inQueues === 0 ? calm + 1 : 0;
      if (calm >= 2) return { settled: true, seconds: (Date.now() - started) / 1000, left: "", deadLettered };
    } catch (error) {
      left = `could not read: ${(error as Error).message}`;
      calm = 0;
    }
    await sleep(500);
  }
  return { settled: false, seconds: (Date.now() - started) / 1000, left, deadLettered };
}

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

export async function verify(input: CheckInput): Promise<Verdict> {
  const { redis, partitions, sql, cast, pairs } = input;
  const lost: string[] = [];
  const doubled: string[] = [];
  let doubledCount = 0;
  const drift: string[] = [];
  let expectedLost = 0;

  const postIds = cast.posts.map((p) => p.id);
  const rows = await sql.query<{ target_id: string; user_id: string }>("SELECT target_id::text, user_id::text FROM likes WHERE target_type = 'post'");
  const inDatabase = new Map<string, Set<string>>(postIds.map((id) => [id, new Set<string>()]));
  for (const row of rows.rows) {
    const set = inDatabase.get(row.target_id);
    if (!set && input.casePosts?.has(row.target_id)) continue;
    if (!set) lost.push(`PostgreSQL holds a like on post ${row.target_id}, which the load never touched (user ${row.user_id})`);
    else set.add(row.user_id);
  }
  const counterRows = await sql.query<{ target_type: string; target_id: string; name: string; value: string }>(
    "SELECT target_type, target_id::text, name, value::text FROM counters WHERE (target_type = 'post' AND name = 'like') OR (target_type = 'user' AND name = 'likesReceived')",
  );
  const dbCounter = (type: string, id: string, name: string) =>
    Number(counterRows.rows.find((r) => r.target_type === type && r.target_id === id && r.name === name)?.value ?? 0);

  const likerIds = new Set(cast.likers.map((l) => l.id));
  /** Likes each post really holds: Redis's members where Redis holds the post, else PostgreSQL's rows. */
  const redisLikes = new Map<string, number>();
  for (const post of cast.posts) {
    const r = await readRedisPost(redis, partitions, post.id);
    const d = inDatabase.get(post.id) as Set<string>;
    for (const userId of likerIds) {
      const pair = pairs.get(`${userId}:${post.id}`) as PairHistory;
      const allowed = pair.allowedFinal();
      const inDb = d.has(userId);
      const occurrences = r.members.get(userId) ?? 0;
      const inRedis = occurrences > 0;
      const problems: string[] = [];
      if (!allowed.has(inDb)) problems.push(`PostgreSQL ${inDb ? "liked" : "not liked"}`);
      if (r.held && !allowed.has(inRedis)) problems.push(`Redis ${inRedis ? "liked" : "not liked"}`);
      if (r.held && inRedis !== inDb && allowed.size > 1)
        problems.push(`Redis ${inRedis ? "liked" : "not liked"} but PostgreSQL ${inDb ? "liked" : "not liked"}`);
      if (problems.length > 0) {
        const expected = allowed.size > 1 ? "either" : allowed.has(true) ? "liked" : "not liked";
        lost.push(`user ${userId} post ${post.id}: expected ${expected}; ${problems.join(", ")}; history: ${pair.describe()}`);
        // Lost with Redis: a state acknowledged before Redis came back, or sent before it died (the old Redis may have
        // run it and answered it, later than the restart when the API was slow to pass the answer on).
        const loss = input.expectedLoss;
        const sentToLostRedis = loss !== undefined && (pair.lastCertainMs < loss.backMs || pair.lastCertainSentMs < loss.crashMs);
        if (sentToLostRedis && (!r.held || inRedis === inDb)) expectedLost++;
      }
      if (occurrences > 1) {
        doubled.push(`user ${userId} is in ${occurrences} membership shards of post ${post.id}`);
        doubledCount += occurrences - 1;
      }
    }
    for (const userId of d) if (!likerIds.has(userId)) lost.push(`PostgreSQL holds a like of post ${post.id} by user ${userId}, who never liked anything`);
    for (const userId of r.members.keys())
      if (!likerIds.has(userId)) lost.push(`Redis holds a like of post ${post.id} by user ${userId}, who never liked anything`);
    redisLikes.set(post.id, r.held ? r.members.size : d.size);

    const dbCount = dbCounter("post", post.id, "like");
    if (dbCount !== d.size) drift.push(`post ${post.id}: PostgreSQL counter ${dbCount}, ${d.size} rows in likes`);
    if (dbCount > d.size) {
      doubled.push(`post ${post.id}: PostgreSQL counter ${dbCount} above its ${d.size} rows`);
      doubledCount += dbCount - d.size;
    }
    if (r.held) {
      const count = Number(r.counters.like ?? 0);
      if (count !== r.members.size) drift.push(`post ${post.id}: Redis count ${count}, ${r.members.size} members`);
      if (count !== dbCount) drift.push(`post ${post.id}: Redis count ${count}, PostgreSQL counter ${dbCount}`);
      if (count > r.members.size) {
        doubled.push(`post ${post.id}: Redis count ${count} above its ${r.members.size} members`);
        doubledCount += count - r.members.size;
      }
    }
  }

  for (const author of cast.authors) {
    const own = cast.posts.filter((p) => p.authorId === author.id);
    const sum = own.reduce((s, p) => s + dbCounter("post", p.id, "like"), 0);
    const rows = own.reduce((s, p) => s + (inDatabase.get(p.id)?.size ?? 0), 0);
    const dbReceived = dbCounter("user", author.id, "likesReceived");
    if (dbReceived !== sum) drift.push(`author ${author.id}: PostgreSQL likesReceived ${dbReceived}, their posts' likes sum to ${sum}`);
    if (dbReceived > rows) {
      doubled.push(`author ${author.id}: PostgreSQL likesReceived ${dbReceived} above the ${rows} rows of likes of their posts`);
      doubledCount += dbReceived - rows;
    }
    const r = await readRedisUser(redis, partitions, author.id);
    if (r.held) {
      const received = Number(r.counters.likesReceived ?? 0);
      const held = own.reduce((s, p) => s + (redisLikes.get(p.id) ?? 0), 0);
      if (received !== dbReceived) drift.push(`author ${author.id}: Redis likesReceived ${received}, PostgreSQL ${dbReceived}`);
      if (received > held) {
        doubled.push(`author ${author.id}: Redis likesReceived ${received} above the ${held} likes their posts hold in Redis`);
        doubledCount += received - held;
      }
    }
  }

  // What users see: the API's counts (read from Redis, rebuilt from PostgreSQL where Redis lost a target).
  type Shown = { posts: ({ id: string; counts: { likes: number }; author: { id: string; counts: { likesReceived: number } } } | null)[] };
  const shown = await input.api.must<Shown>(postsQuery, { ids: postIds });
  for (const [i, post] of shown.posts.entries()) {
    const id = postIds[i] as string;
    if (!post) {
      drift.push(`post ${id}: the API does not find it`);
      continue;
    }
    const dbCount = dbCounter("post", id, "like");
    if (post.counts.likes !== dbCount) drift.push(`post ${id}: the API shows ${post.counts.likes} likes, PostgreSQL ${dbCount}`);
    const dbReceived = dbCounter("user", post.author.id, "likesReceived");
    if (post.author.counts.likesReceived !== dbReceived)
      drift.push(`author ${post.author.id}: the API shows likesReceived ${post.author.counts.likesReceived}, PostgreSQL ${dbReceived}`);
  }

  let unknown = 0;
  const misanswered: string[] = [];
  let expectedMisanswered = 0;
  for (const pair of pairs.values()) {
    if (pair.allowedFinal().size > 1) unknown++;
    for (const op of pair.misanswered()) {
      misanswered.push(
        `user ${pair.userId} post ${pair.postId}: ${op.kind} at ${(op.startMs / 1000).toFixed(2)} s answered changed=${String(op.outcome.kind === "acknowledged" && op.outcome.changed)}, expected ${String(op.expectedChanged)}; history: ${pair.describe(op)}`,
      );
      if (input.expectedLoss && op.priorCertainMs < input.expectedLoss.backMs && op.endMs >= input.expectedLoss.crashMs) expectedMisanswered++;
    }
  }
  return { lost, doubled: [...new Set(doubled)], drift: [...new Set(drift)], unknown, misanswered, expectedLost, expectedMisanswered, doubledCount };
}

/** How many acknowledged views of the hot post a case may lose. */
export type ViewsAllowance =
  | { readonly kind: "none" }
  /** An API process killed at `killMs` loses the views it held since its last flush: those answered within `windowMs` before. */
  | { readonly kind: "flushWindow"; readonly killMs: number; readonly windowMs: number }
  /** Redis without persistence loses what its outbox held: any number. */
  | { readonly kind: "any" };

export interface ViewsVerdict {
  /** Views answered counted. */
  readonly acknowledged: number;
  /** Views in reports that got no answer: each may have counted or not. */
  readonly unanswered: number;
  /** Views the hot post holds: Redis's where it holds the post, else PostgreSQL's. */
  readonly counted: number;
  /** Acknowledged views the post does not hold. */
  readonly lost: number;
  /** Of them, how many the case allows. */
  readonly allowedLost: number;
  /** Views counted beyond every view sent that may have counted. */
  readonly doubled: number;
  readonly drift: string | null;
}

/** The hot post's views in Redis and PostgreSQL, against the load's reports. */
export async function verifyViews(
  redis: RedisClient,
  partitions: number,
  sql: pg.Client,
  hotPostId: string,
  reports: ViewReports,
  allowance: ViewsAllowance,
): Promise<ViewsVerdict> {
  const hash = await redis.hgetall(createRedisKeys(partitions).counters({ type: "post", id: BigInt(hotPostId) }));
  const held = Object.keys(hash).length > 0;
  const row = await sql.query<{ value: string }>("SELECT value::text FROM counters WHERE target_type = 'post' AND target_id = $1 AND name = 'read'", [
    hotPostId,
  ]);
  const inDatabase = Number(row.rows[0]?.value ?? 0);
  const counted = held ? Number(hash.read ?? 0) : inDatabase;
  const acknowledged = reports.acknowledged.reduce((n, r) => n + r.views, 0);
  const lost = Math.max(0, acknowledged - counted);
  const allowedLost =
    allowance.kind === "any"
      ? lost
      : allowance.kind === "flushWindow"
        ? reports.acknowledged.filter((r) => r.endMs > allowance.killMs - allowance.windowMs && r.endMs <= allowance.killMs).reduce((n, r) => n + r.views, 0)
        : 0;
  return {
    acknowledged,
    unanswered: reports.unanswered,
    counted,
    lost,
    allowedLost,
    doubled: Math.max(0, counted - acknowledged - reports.unanswered),
    drift: held && counted !== inDatabase ? `hot post ${hotPostId}: Redis holds ${counted} views, PostgreSQL ${inDatabase}` : null,
  };
}
