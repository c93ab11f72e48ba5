// The HTTP scenarios of `npm run bench`, run against the service on the
// realistic data set, and the raw Redis figures they are compared with.
import { execFileSync } from "node:child_process";
import { request as httpRequest } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import autocannon from "autocannon";
import { counterNames, relations, type Relation, type Target } from "../../src/domain/model/index.js";
import { batchRead, type RedisClient } from "../../src/stores/redis/client.js";
import { createRedisKeys, membershipGenerations } from "../../src/stores/redis/keys.js";
import { createMembershipStore } from "../../src/stores/redis/membership-store.js";
import { relationLayouts } from "../../src/stores/redis/relations.js";
import { loadScript } from "../../src/stores/redis/scripts.js";
import type { Dataset } from "./dataset.js";
import { partitions, scrapeMetrics, type RunningService } from "./harness.js";
import type { BenchRedis, PrivateRedis, RedisCounters } from "./private-redis.js";
import { cpuBetween, machineBusySeconds, otherServersCpu } from "./process-cpu.js";

export const connections = 64;

export interface HttpFigures {
  readonly scenario: string;
  readonly mode: string;
  readonly requests: number;
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly failures: number;
  readonly redisCommandsPerRequest: number;
  /** Calls of Lua scripts (EVALSHA, EVAL and their read-only forms) per request. */
  readonly redisScriptsPerRequest: number;
  /** The commands Redis ran most per request, inside scripts or not: "name count, …". */
  readonly redisTopCommands: string;
  readonly redisRoundTripsPerRequest: number;
  readonly redisBytesPerRequest: number;
  readonly redisCpuUsPerRequest: number;
  readonly apiCpuMsPerRequest: number;
  readonly pipelineCpuMsPerRequest: number;
  readonly rabbitmqCpuMsPerRequest: number;
  readonly postgresCpuMsPerRequest: number;
  readonly loadCpuMsPerRequest: number;
  /** Cores the whole machine kept busy on average during the run: the service, Redis, the load and whatever else runs here. */
  readonly machineCores: number;
  /** Of the targets a request read, the share answered from the API processes' hot counts; null when it kept none. */
  readonly hotCountsHitRate: number | null;
  /** Over the reads answered from hot counts, the 99th percentile of how stale they could be (ms, a histogram bucket's bound). */
  readonly hotCountsStalenessP99Ms: number | null;
  /** Whether counts moved by exactly the acknowledged changes, where the scenario changes any. */
  readonly exact: string;
}

/** A membership one request asks for: `user` joins `target` (a post, or a user to follow). */
interface Pair {
  readonly user: bigint;
  readonly target: bigint;
}

/** What one request of a scenario sends, and the membership it asks for, if any. */
interface Request {
  readonly body: string;
  readonly token: string;
  readonly change?: Pair;
}

interface Load {
  readonly scenario: string;
  readonly mode: string;
  readonly service: RunningService;
  readonly redis: BenchRedis;
  readonly request: (n: number) => Request;
  /** How long the load runs, unless `amount` is given. */
  readonly durationSeconds: number;
  /** Exactly this many requests instead of a duration. */
  readonly amount?: number;
  /** Sees every answered request that asked for a membership, with its body. */
  readonly onChangeAnswered?: (change: Pair, body: string) => void;
  /** Sees every answer's body. */
  readonly onAnswered?: (body: string) => void;
}

const round = (n: number, digits = 0) => Number(n.toFixed(digits));

const scriptCommands = ["evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro"];

function callsBetween(before: RedisCounters, after: RedisCounters): [string, number][] {
  return [...after.byCommand].map(([name, calls]) => [name, calls - (before.byCommand.get(name) ?? 0)]);
}

function scriptCallsBetween(before: RedisCounters, after: RedisCounters): number {
  return callsBetween(before, after).reduce((n, [name, calls]) => n + (scriptCommands.includes(name) ? calls : 0), 0);
}

/** The twelve commands run most between two samples, per request; the samples' own INFO left out. */
function topCommands(before: RedisCounters, after: RedisCounters, requests: number): string {
  return callsBetween(before, after)
    .filter(([name, calls]) => name !== "info" && calls > 0)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 12)
    .map(([name, calls]) => `${name} ${round(calls / Math.max(1, requests), 1)}`)
    .join(", ");
}

async function run(load: Load): Promise<Omit<HttpFigures, "exact">> {
  let next = 0;
  let failures = 0;
  const redisBefore: RedisCounters = await load.redis.counters();
  const cpuBefore = load.service.cpu();
  const othersBefore = otherServersCpu();
  const metricsBefore = await scrapeMetrics(load.service.metricsUrl);
  const ownBefore = process.cpuUsage();
  const machineBefore = machineBusySeconds();
  // Timed here, to the last answer: autocannon ends a run only at its next one-second sample, so
  // its duration (and the end of its callback) rounds a run of a fixed amount up to whole seconds
  // (20,000 likes read as "3,328/s" whatever their real rate).
  const startedMs = performance.now();
  let lastAnswerMs = startedMs;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    autocannon(
      {
        url: load.service.url,
        connections,
        // autocannon shares an amount out over the connections exactly; a duration it stops only at its next sample.
        ...(load.amount === undefined ? { duration: load.durationSeconds } : { amount: load.amount }),
        requests: [
          {
            method: "POST",
            // One request in flight per connection, so the connection's context tells which change an answer is for.
            setupRequest: (req, context: { change?: Pair }) => {
              const { body, token, change } = load.request(next++);
              context.change = change;
              // An empty token is an anonymous request: no Authorization header at all.
              return { ...req, body, headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) } };
            },
            onResponse: (status, body, context: { change?: Pair }) => {
              lastAnswerMs = performance.now();
              if (status !== 200 || body.includes('"errors"')) failures++;
              if (context.change) load.onChangeAnswered?.(context.change, body);
              load.onAnswered?.(body);
            },
          },
        ],
      },
      // autocannon types its error as any; it is an Error when set.
      (error: Error | null, result) => (error ? reject(error) : resolve(result)),
    );
  });
  const elapsedSeconds = (lastAnswerMs - startedMs) / 1000;
  const own = process.cpuUsage(ownBefore);
  const machine = machineBusySeconds() - machineBefore;
  const cpuAfter = load.service.cpu();
  const othersAfter = otherServersCpu();
  const redisAfter = await load.redis.counters();
  const metricsAfter = await scrapeMetrics(load.service.metricsUrl);
  const requests = result.requests.total;
  const per = (n: number) => n / Math.max(1, requests);
  return {
    scenario: load.scenario,
    mode: load.mode,
    requests,
    requestsPerSecond: Math.round(requests / elapsedSeconds),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    maxMs: result.latency.max,
    failures: failures + result.errors + result.timeouts + result.non2xx,
    // The two INFO samples count one command and one read of the bench's own on each server between them.
    redisCommandsPerRequest: round(per(redisAfter.commands - redisBefore.commands - load.redis.servers), 1),
    redisScriptsPerRequest: round(per(scriptCallsBetween(redisBefore, redisAfter)), 2),
    redisTopCommands: topCommands(redisBefore, redisAfter, requests),
    redisRoundTripsPerRequest: round(per(redisAfter.reads - redisBefore.reads - load.redis.servers), 2),
    redisBytesPerRequest: Math.round(per(redisAfter.bytesIn - redisBefore.bytesIn + redisAfter.bytesOut - redisBefore.bytesOut)),
    redisCpuUsPerRequest: round(per((redisAfter.cpuSeconds - redisBefore.cpuSeconds) * 1e6)),
    apiCpuMsPerRequest: round(per((cpuAfter.api - cpuBefore.api) * 1e3), 3),
    pipelineCpuMsPerRequest: round(per((cpuAfter.pipeline - cpuBefore.pipeline) * 1e3), 3),
    rabbitmqCpuMsPerRequest: round(per(cpuBetween(othersBefore.rabbitmq, othersAfter.rabbitmq) * 1e3), 3),
    postgresCpuMsPerRequest: round(per(cpuBetween(othersBefore.postgres, othersAfter.postgres) * 1e3), 3),
    loadCpuMsPerRequest: round(per((own.user + own.system) / 1e3), 3),
    machineCores: round(machine / elapsedSeconds, 2),
    ...hotCountsFigures(metricsBefore, metricsAfter),
  };
}

/** The hot counts' hit rate and staleness over a run, from the service's metrics before and after it. */
function hotCountsFigures(
  before: ReadonlyMap<string, number>,
  after: ReadonlyMap<string, number>,
): Pick<HttpFigures, "hotCountsHitRate" | "hotCountsStalenessP99Ms"> {
  const delta = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
  const hits = delta("likes_hot_counts_hits_total");
  const reads = hits + delta("likes_hot_counts_misses_total");
  const bucket = /^likes_hot_counts_staleness_bound_seconds_bucket\{le="([^"]+)"\}$/;
  const buckets = [...after.keys()]
    .flatMap((name) => {
      const le = bucket.exec(name)?.[1];
      return le === undefined || le === "+Inf" ? [] : [{ le: Number(le), count: delta(name) }];
    })
    .sort((x, y) => x.le - y.le);
  const served = delta("likes_hot_counts_staleness_bound_seconds_count");
  const p99 = served > 0 ? buckets.find((b) => b.count >= 0.99 * served)?.le : undefined;
  return {
    hotCountsHitRate: reads > 0 ? round(hits / reads, 3) : null,
    hotCountsStalenessP99Ms: p99 === undefined ? null : round(p99 * 1000, 1),
  };
}

export interface ScenarioContext {
  readonly data: Dataset;
  readonly redis: BenchRedis;
  readonly service: RunningService;
  readonly mode: string;
  readonly durationSeconds: number;
  readonly warmUpSeconds: number;
  /** Bearer tokens by user id. */
  readonly token: (userId: bigint) => string;
  /** Fresh (user, post) pairs no scenario has used yet. */
  readonly fresh: FreshPairs;
}

const random = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)] as T;

/** `n` distinct random items. */
function sample<T>(items: readonly T[], n: number): T[] {
  const picked = new Set<T>();
  while (picked.size < n) picked.add(random(items));
  return [...picked];
}

const feedQuery = "query($ids: [ID!]!) { posts(ids: $ids) { id counts { likes reads comments } viewerHasLiked } }";
const feedBody = (posts: readonly bigint[]) => JSON.stringify({ query: feedQuery, variables: { ids: posts.map(String) } });
const likeMutation = "mutation($id: ID!) { likePost(postId: $id) { changed post { id counts { likes } viewerHasLiked } } }";
const likeBody = (post: bigint) => JSON.stringify({ query: likeMutation, variables: { id: String(post) } });
const collectMutation = "mutation($id: ID!) { collectPost(postId: $id) { changed post { id counts { collects } viewerHasCollected } } }";
const followMutation = "mutation($id: ID!) { followUser(userId: $id) { changed user { id counts { followers } viewerFollows } } }";
const viewsMutation = "mutation($ids: [ID!]!) { recordViews(postIds: $ids) }";

/**
 * Pairs of a user who has liked nothing and a post, each handed out once per
 * bench run: every like of the like scenarios is a first like. Collects and
 * follows draw from the same idle users in turns of their own: the data set
 * holds no collect or follow.
 */
export class FreshPairs {
  private readonly nextHot: Record<Relation, number> = { like: 0, collect: 0, follow: 0 };
  private nextSpread = 0;

  constructor(private readonly data: Dataset) {}

  /** How many users have not liked the hot post yet. */
  get hotLeft(): number {
    return this.hotLeftOf("like");
  }

  hotLeftOf(relation: Relation): number {
    return this.data.idleIds.length - this.nextHot[relation];
  }

  /** A user who has not liked post 1 (which every liker of the data set likes). */
  hotLiker(): bigint {
    return this.hotMember("like");
  }

  /** A user who has not joined the hot target of the relation (post 1, or user 1 for follows). */
  hotMember(relation: Relation): bigint {
    const user = this.data.idleIds[this.nextHot[relation]++];
    if (user === undefined) throw new Error(`every idle user has joined the hot target's ${relation}s; run fewer hot rounds`);
    return user;
  }

  /** A user and a post other than post 1 they have not liked, spread over users and posts. */
  spreadPair(): Pair {
    const n = this.nextSpread++;
    const users = this.data.idleIds.length;
    const others = this.data.postIds.length - 1;
    const u = n % users;
    const round = Math.floor(n / users);
    if (round >= others) throw new Error("every (idle user, post) pair has been liked");
    // The same user comes back only after every other idle user, each time to another post.
    return { user: this.data.idleIds[u] as bigint, target: this.data.postIds[1 + ((u * 7_919 + round) % others)] as bigint };
  }
}

const targetTypeOf = (relation: Relation) => relations[relation].targets[0];

/** The relation's counter on each target (in one pipeline, or one per node of a cluster). */
async function memberCounts(redis: RedisClient, relation: Relation, targets: readonly bigint[]): Promise<number[]> {
  const keys = createRedisKeys(partitions);
  const calls = targets.map((id) => [keys.counters({ type: targetTypeOf(relation), id }), relations[relation].counter] as const);
  return (await batchRead(redis, "hget", calls)).map((value) => Number(value ?? 0));
}

/** Counts once requests left in flight when the load stopped have been applied: unchanged for half a second. */
async function settledCounts(redis: RedisClient, relation: Relation, targets: readonly bigint[]): Promise<number[]> {
  const sum = (counts: number[]) => counts.reduce((a, b) => a + b, 0);
  let counts = await memberCounts(redis, relation, targets);
  for (let i = 0; i < 60; i++) {
    await sleep(500);
    const again = await memberCounts(redis, relation, targets);
    if (sum(again) === sum(counts)) return again;
    counts = again;
  }
  throw new Error(`${relation} counts were still moving 30 s after the load stopped`);
}

/** Which of the pairs Redis holds as members of the relation. */
async function members(redis: RedisClient, relation: Relation, pairs: readonly Pair[]): Promise<boolean[]> {
  const store = createMembershipStore(redis, createRedisKeys(partitions));
  const held: boolean[] = [];
  for (let i = 0; i < pairs.length; i += 1_000) {
    const chunk = pairs.slice(i, i + 1_000);
    held.push(
      ...(await Promise.all(
        chunk.map(async ({ user, target }) => (await store.holds(relation, [{ type: targetTypeOf(relation), id: target }], user))[0] === true),
      )),
    );
  }
  return held;
}

const pairKey = ({ user, target }: Pair) => `${user}:${target}`;

/**
 * Runs a load of membership changes, then checks exactness against Redis itself:
 * every change answered `changed: true` is held, and the counts moved by exactly
 * the sent changes that are held now and were not before (a load that stops at its
 * duration leaves some requests unanswered, though the service applied them).
 */
async function countedChanges(
  ctx: ScenarioContext,
  relation: Relation,
  targets: readonly bigint[],
  load: Omit<Load, "onChangeAnswered" | "redis" | "service" | "mode">,
  heldBefore: (pairs: readonly Pair[]) => Promise<boolean[]>,
): Promise<HttpFigures> {
  // The warm-up's last requests may still be landing.
  const before = await settledCounts(ctx.redis.client, relation, targets);
  const sent = new Map<string, Pair>();
  const acknowledged: Pair[] = [];
  const figures = await run({
    ...load,
    redis: ctx.redis,
    service: ctx.service,
    mode: ctx.mode,
    request: (n) => {
      const request = load.request(n);
      if (request.change) sent.set(pairKey(request.change), request.change);
      return request;
    },
    onChangeAnswered: (change, body) => void (body.includes('"changed":true') && acknowledged.push(change)),
  });
  const after = await settledCounts(ctx.redis.client, relation, targets);
  const moved = after.reduce((sum, n, i) => sum + n - (before[i] as number), 0);
  const pairs = [...sent.values()];
  const [was, is, ackHeld] = await Promise.all([
    heldBefore(pairs),
    members(ctx.redis.client, relation, pairs),
    members(ctx.redis.client, relation, acknowledged),
  ]);
  const gained = pairs.filter((_, i) => is[i] && !was[i]).length;
  const lostAcks = ackHeld.filter((held) => !held).length;
  const exact = moved === gained && lostAcks === 0 && acknowledged.length <= gained;
  return {
    ...figures,
    exact: exact
      ? `yes (+${moved}, ${acknowledged.length} answered changed)`
      : `NO: counts moved ${moved}, gained ${gained}, answered changed ${acknowledged.length}, of them not held ${lostAcks}`,
  };
}

/**
 * Load of the same kind, unmeasured, before each scenario: the service's processes
 * compile and optimise their code, open connections and cache post rows on first
 * use, as they would long before production traffic peaks. Like scenarios warm up
 * with spread likes, so the hot post's fresh users are kept for the measurement.
 */
async function warmUp(ctx: ScenarioContext, request: (n: number) => Request): Promise<void> {
  await run({ scenario: "warm-up", mode: ctx.mode, service: ctx.service, redis: ctx.redis, durationSeconds: ctx.warmUpSeconds, request });
}

function spreadLike(ctx: ScenarioContext): Request {
  const like = ctx.fresh.spreadPair();
  return { body: likeBody(like.target), token: ctx.token(like.user), change: like };
}

/** posts(ids) of 100 random distinct posts, new ids every request, for a random viewer who likes things. */
export async function feed100(ctx: ScenarioContext): Promise<HttpFigures> {
  const request = () => ({ body: feedBody(sample(ctx.data.postIds, 100)), token: ctx.token(random(ctx.data.likerIds)) });
  await warmUp(ctx, request);
  return {
    ...(await run({ scenario: "feed100", mode: ctx.mode, service: ctx.service, redis: ctx.redis, durationSeconds: ctx.durationSeconds, request })),
    exact: "n/a",
  };
}

const hotPostsBody = JSON.stringify({ query: "{ hotPosts(first: 100, window: DAY) { id title counts { likes reads comments collects } } }" });

/**
 * hotPosts(first: 100, window: DAY) with every count, anonymous: the ranking's ids
 * from Redis, the posts from the catalog, their counts read live per request.
 */
export async function hotPosts(ctx: ScenarioContext): Promise<HttpFigures> {
  const request = () => ({ body: hotPostsBody, token: "" });
  await warmUp(ctx, request);
  let full = 0;
  let answered = 0;
  const figures = await run({
    scenario: "hot-posts",
    mode: ctx.mode,
    service: ctx.service,
    redis: ctx.redis,
    durationSeconds: ctx.durationSeconds,
    request,
    onAnswered: (body) => {
      answered++;
      if (body.split('"counts"').length - 1 === 100) full++;
    },
  });
  return { ...figures, exact: full === answered ? "n/a (100 posts every answer)" : `NO: ${answered - full} of ${answered} answers without 100 posts` };
}

const none = async (pairs: readonly Pair[]) => pairs.map(() => false);

/** Users who have liked nothing like post 1, the hottest post, each once: `likes` of them (as many as the duration would take, about). */
export async function likeHot(ctx: ScenarioContext, likes: number): Promise<HttpFigures> {
  return hot(ctx, "like", likes);
}

/** The same with collects of post 1. */
export async function collectHot(ctx: ScenarioContext, collects: number): Promise<HttpFigures> {
  return hot(ctx, "collect", collects);
}

/** The same with follows of user 1 (a user of the data set who likes things). */
export async function followHot(ctx: ScenarioContext, follows: number): Promise<HttpFigures> {
  return hot(ctx, "follow", follows);
}

const hotBodies: Record<Relation, (target: bigint) => string> = {
  like: likeBody,
  collect: (target) => JSON.stringify({ query: collectMutation, variables: { id: String(target) } }),
  follow: (target) => JSON.stringify({ query: followMutation, variables: { id: String(target) } }),
};

async function hot(ctx: ScenarioContext, relation: Relation, changes: number): Promise<HttpFigures> {
  await warmUp(ctx, () => spreadLike(ctx));
  const target = relation === "follow" ? (ctx.data.likerIds[0] as bigint) : (ctx.data.postIds[0] as bigint);
  const body = hotBodies[relation](target);
  return countedChanges(
    ctx,
    relation,
    [target],
    {
      scenario: `${relation}-hot`,
      durationSeconds: ctx.durationSeconds,
      amount: Math.min(changes, ctx.fresh.hotLeftOf(relation)),
      request: () => {
        const user = ctx.fresh.hotMember(relation);
        return { body, token: ctx.token(user), change: { user, target } };
      },
    },
    none,
  );
}

/** Users who have liked nothing like random posts, each (user, post) pair once. */
export async function likeSpread(ctx: ScenarioContext): Promise<HttpFigures> {
  await warmUp(ctx, () => spreadLike(ctx));
  return countedChanges(ctx, "like", ctx.data.postIds, { scenario: "like-spread", durationSeconds: ctx.durationSeconds, request: () => spreadLike(ctx) }, none);
}

/**
 * 90% feeds of 20 random posts, 10% likes of a random post, all by random
 * viewers who like things (so some likes find the post already liked). The
 * likes are drawn before the run, so which were held before is known.
 */
export async function mixed(ctx: ScenarioContext): Promise<HttpFigures> {
  const likes: Pair[] = Array.from({ length: 5_000 * ctx.durationSeconds }, () => ({ user: random(ctx.data.likerIds), target: random(ctx.data.postIds) }));
  const heldAtStart = new Map((await members(ctx.redis.client, "like", likes)).map((held, i) => [pairKey(likes[i] as Pair), held]));
  let nextLike = 0;
  const feed20 = () => ({ body: feedBody(sample(ctx.data.postIds, 20)), token: ctx.token(random(ctx.data.likerIds)) });
  await warmUp(ctx, () => (Math.random() < 0.1 ? spreadLike(ctx) : feed20()));
  return countedChanges(
    ctx,
    "like",
    ctx.data.postIds,
    {
      scenario: "mixed",
      durationSeconds: ctx.durationSeconds,
      request: () => {
        if (Math.random() < 0.1) {
          const like = likes[nextLike++ % likes.length] as Pair;
          return { body: likeBody(like.target), token: ctx.token(like.user), change: like };
        }
        return feed20();
      },
    },
    async (pairs) => pairs.map((pair) => heldAtStart.get(pairKey(pair)) === true),
  );
}

/** Calls of Lua scripts Redis ran so far (EVALSHA and EVAL), from INFO commandstats of every server. */
async function scriptCalls(redis: BenchRedis): Promise<number> {
  const stats = (await redis.info("commandstats")).join("\n");
  return [...stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
}

export interface ViewsFigures {
  readonly http: HttpFigures;
  /** Views of the hot post counted per second. */
  readonly hotViewsPerSecond: number;
  /** Reports each request carried, and how many of them were of the hot post. */
  readonly perRequest: string;
  /** Script calls Redis ran per second of the load: the flushes of the views (views are anonymous, so no rate budget is charged). */
  readonly redisScriptsPerSecond: number;
}

/**
 * Anonymous clients report views, each request a batch that holds post 1, the
 * hottest post, `hotPerRequest` times among `perRequest` reports (the rest
 * random posts): a feed page's views (20 reports, the hot post once), or a
 * client that buffers what it displayed (100 reports of the hot post). The hot
 * post's 'read' counter must move by the views answered counted, and at most by
 * those sent too (requests in flight when the load stopped were counted
 * unanswered), once the last flush landed.
 */
export async function viewsHot(ctx: ScenarioContext, perRequest: number, hotPerRequest: number): Promise<ViewsFigures> {
  const hotPost = ctx.data.postIds[0] as bigint;
  const others = ctx.data.postIds.slice(1);
  const body = () => {
    const ids = [...Array.from({ length: hotPerRequest }, () => hotPost), ...sample(others, perRequest - hotPerRequest)];
    return JSON.stringify({ query: viewsMutation, variables: { ids: ids.map(String) } });
  };
  let sent = 0;
  const request = () => {
    sent++;
    return { body: body(), token: "" };
  };
  await warmUp(ctx, request);
  const read = async () => Number((await ctx.redis.client.hget(createRedisKeys(partitions).counters({ type: "post", id: hotPost }), "read")) ?? 0);
  // The warm-up's views are flushed within a second.
  await sleep(2_000);
  const before = await read();
  const scriptsBefore = await scriptCalls(ctx.redis);
  sent = 0;
  let answered = 0;
  const started = performance.now();
  const figures = await run({
    scenario: hotPerRequest === perRequest ? "views-hot-batched" : "views-hot",
    mode: ctx.mode,
    service: ctx.service,
    redis: ctx.redis,
    durationSeconds: ctx.durationSeconds,
    request,
    onAnswered: (text) => {
      if (/"recordViews":\d+/.test(text)) answered++;
    },
  });
  const seconds = (performance.now() - started) / 1000;
  const scripts = (await scriptCalls(ctx.redis)) - scriptsBefore;
  await sleep(2_000);
  const moved = (await read()) - before;
  const [low, high] = [answered * hotPerRequest, sent * hotPerRequest];
  return {
    http: {
      ...figures,
      exact:
        moved >= low && moved <= high ? `yes (+${moved} views of the hot post, ${low} answered)` : `NO: read moved ${moved}, answered ${low}, sent ${high}`,
    },
    hotViewsPerSecond: Math.round(low / seconds),
    perRequest: hotPerRequest === perRequest ? `${perRequest} reports of the hot post` : `${perRequest} reports, ${hotPerRequest} of the hot post`,
    redisScriptsPerSecond: Number((scripts / seconds).toFixed(1)),
  };
}

const cli = (redis: PrivateRedis, ...args: string[]) => execFileSync("redis-cli", ["-p", String(redis.port), ...args], { encoding: "utf8" }).trim();

function redisBenchmark(redis: PrivateRedis, args: readonly string[]): number {
  const output = execFileSync("redis-benchmark", ["-p", String(redis.port), "-c", String(connections), "-q", ...args], { encoding: "utf8" });
  const match = /([\d.]+) requests per second/.exec(output);
  if (!match?.[1]) throw new Error(`could not read redis-benchmark's output: ${output}`);
  return Number(match[1]);
}

/** redis-benchmark running the like script itself by EVALSHA: the ceiling for like mutations here. */
export function rawLikeScript(redis: PrivateRedis): number {
  const sha = cli(redis, "SCRIPT", "LOAD", loadScript("add-member"));
  const target: Target = { type: "post", id: 999_999_999n };
  const keys = createRedisKeys(partitions);
  cli(redis, "HSET", keys.counters(target), "like", "0");
  // One shard key per generation, as the service sends; a large capacity keeps every call a real insert.
  const shardKeys = keys.memberShards("like", target, 1n);
  // A receipt per call, as the service sends (redis-benchmark fills in __rand_int__ per call).
  const receipt = `${keys.receipt(target)}__rand_int__`;
  const perSecond = redisBenchmark(redis, [
    "-n",
    "300000",
    "-r",
    "100000000",
    "EVALSHA",
    sha,
    String(4 + membershipGenerations),
    keys.counters(target),
    keys.outbox(target),
    keys.touched(target, "like"),
    receipt,
    ...shardKeys,
    "1__rand_int__",
    "1000000000",
    "like",
    "post",
    String(target.id),
    relationLayouts.like.tag,
    relationLayouts.like.generationField,
    ...counterNames.post,
  ]);
  cli(redis, "DEL", keys.counters(target), keys.outbox(target), keys.touched(target, "like"), ...shardKeys);
  return Math.round(perSecond);
}

/**
 * redis-benchmark reading counter hashes as the service's hashes stand, in
 * pipelines of 100 HGETALL: the ceiling of a feed of 100 posts read from Redis.
 * The hashes are copies of the first 10,000 posts' (redis-benchmark can only
 * name keys by a zero-padded random number).
 */
export async function rawFeedPipelines(redis: PrivateRedis, posts: readonly bigint[]): Promise<number> {
  const keys = createRedisKeys(partitions);
  const copies = posts.slice(0, 10_000).map((_, i) => `bench:cnt:${String(i).padStart(12, "0")}`);
  const copy = redis.client.pipeline();
  posts.slice(0, 10_000).forEach((id, i) => copy.copy(keys.counters({ type: "post", id }), copies[i] as string, "REPLACE"));
  await copy.exec();
  const perSecond = redisBenchmark(redis, ["-n", "2000000", "-P", "100", "-r", String(copies.length), "HGETALL", "bench:cnt:__rand_int__"]);
  await redis.client.del(...copies);
  return Math.round(perSecond / 100);
}

/** A POST to the service on a connection of its own, so that any API process may answer it. */
function postAlone(url: string, body: string, token = ""): Promise<string> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, {
      method: "POST",
      agent: false,
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    });
    request.on("response", (response) => {
      let text = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => (text += chunk));
      response.on("end", () => resolve(text));
      response.on("error", reject);
    });
    request.on("error", reject);
    request.end(body);
  });
}

export interface LagFigures {
  readonly mode: string;
  readonly likes: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Reads answered with the count from before the like, after its answer. */
  readonly staleReads: number;
}

/**
 * How soon a like shows in counts read through the service: a post is read until
 * every API process holds its counts, a new user likes it, and it is read again,
 * each read on a connection of its own (so any process answers), until a read
 * shows the like. The lag is from the like's answer to the start of that read.
 */
export async function countsLag(ctx: ScenarioContext, likes = 200): Promise<LagFigures> {
  const read = (post: bigint) => JSON.stringify({ query: "query($id: ID!) { post(id: $id) { counts { likes } } }", variables: { id: String(post) } });
  const likesOf = (text: string) => Number(/"likes":(\d+)/.exec(text)?.[1] ?? Number.NaN);
  const lags: number[] = [];
  let staleReads = 0;
  for (let i = 0; i < likes; i++) {
    const { user, target } = ctx.fresh.spreadPair();
    let before = 0;
    for (let r = 0; r < 4; r++) before = likesOf(await postAlone(ctx.service.url, read(target)));
    const answer = await postAlone(ctx.service.url, likeBody(target), ctx.token(user));
    const answeredAt = performance.now();
    if (!answer.includes('"changed":true')) continue;
    for (;;) {
      const startedMs = performance.now() - answeredAt;
      if (likesOf(await postAlone(ctx.service.url, read(target))) > before) {
        lags.push(startedMs);
        break;
      }
      staleReads++;
      if (startedMs > 5_000) throw new Error(`post ${target} did not show a like 5 s after it was answered`);
    }
  }
  lags.sort((a, b) => a - b);
  const at = (q: number) => round(lags[Math.min(lags.length - 1, Math.floor(q * lags.length))] ?? 0, 2);
  return { mode: ctx.mode, likes: lags.length, p50Ms: at(0.5), p99Ms: at(0.99), maxMs: round(lags.at(-1) ?? 0, 2), staleReads };
}
