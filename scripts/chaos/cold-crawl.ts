// cold-crawl: after Redis lost its data, anonymous crawlers read thousands of
// cold posts 100 at a time while signed-in users like and log in. Each cold post
// read is rebuilt from PostgreSQL into Redis; unbounded, the crawl takes every
// PostgreSQL connection, fails itself and slows everyone else, and everything it
// touched stays in a Redis that evicts nothing. Redis gets a maxmemory as npm
// start's has; the likes pause and the pipeline settles before the flush, so the
// flush loses nothing acknowledged (what a Redis restart without persistence loses
// is the redis-restart-volatile case's business).
import { readFileSync } from "node:fs";
import path from "node:path";
import { projectRoot } from "../../src/stores/postgres/schema-engine.js";
import { settleBeforeFlush, singleRedis, type ChaosCase, type FaultContext } from "./case.js";
import { castPassword, type CastUser } from "./cast.js";
import { countsText, ms, percentile, window } from "./figures.js";
import { startPaced, type Paced } from "./paced.js";
import { mb, memory } from "./redis-figures.js";
import { seedPosts } from "./seed-posts.js";

const crawlers = 8;
const crawlPosts = 3_200;
const pageSize = 100;
const loginsPerSecond = 4;
const likesPerSecond = 100;
const baselineMs = 4_000;

/** What npm start gives its Redis when it says (scripts/services.sh), else the value the case uses meanwhile. */
function npmStartMaxMemory(): { readonly value: string; readonly source: string } {
  for (const file of ["scripts/services.sh", "scripts/start.sh"]) {
    try {
      const text = readFileSync(path.join(projectRoot, file), "utf8");
      const match = /--maxmemory\s+"?(?:\$\{[A-Z_]+:-)?(\d+(?:[kmg]b?)?)/i.exec(text);
      if (match) return { value: (match[1] as string).toLowerCase(), source: `npm start's (${file})` };
    } catch {
      // Not there in this checkout.
    }
  }
  return { value: "256mb", source: "npm start sets none; the case's own" };
}

const maxMemory = npmStartMaxMemory();
const crawlQuery = "query($ids: [ID!]!) { posts(ids: $ids) { id title createdAt counts { likes reads comments } } }";
const loginMutation = "mutation($u: String!, $p: String!) { login(username: $u, password: $p) { token } }";

let crawlIds: readonly string[] = [];

/** Logins of the load's users, round robin, at `loginsPerSecond`. */
function startLogins(ctx: FaultContext): Paced {
  const users = [...ctx.cast.likers, ...ctx.cast.authors];
  let next = 0;
  return startPaced(
    loginsPerSecond,
    () => ctx.elapsedMs(),
    async () => {
      const user = users[next++ % users.length] as CastUser;
      const answer = await ctx.api.call(loginMutation, { u: user.username, p: castPassword });
      return answer.errors?.length ? (answer.errors[0]?.extensions?.code ?? "error") : null;
    },
  );
}

/** Redis's used_memory every 250 ms until stopped. */
function sampleMemory(ctx: FaultContext): { readonly readings: number[]; stop(): Promise<void> } {
  const readings: number[] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      readings.push((await memory(singleRedis(ctx))).used);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  })();
  return {
    readings,
    async stop() {
      sampling = false;
      await sampler;
    },
  };
}

interface CrawlRequest {
  readonly ms: number;
  readonly errors: string[];
}

async function crawlPage(ctx: FaultContext, page: number): Promise<CrawlRequest> {
  const started = Date.now();
  let errors: string[];
  try {
    const answer = await ctx.api.call(crawlQuery, { ids: crawlIds.slice(page * pageSize, (page + 1) * pageSize) }, undefined, 30_000);
    errors = (answer.errors ?? []).map((e) => e.extensions?.code ?? "no code");
  } catch (error) {
    errors = [(error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name];
  }
  return { ms: Date.now() - started, errors };
}

/** Every crawler reads its share of the pages, one page at a time. */
async function crawl(ctx: FaultContext): Promise<CrawlRequest[]> {
  const requests: CrawlRequest[] = [];
  await Promise.all(
    Array.from({ length: crawlers }, async (_, c) => {
      for (let page = c; page * pageSize < crawlIds.length; page += crawlers) requests.push(await crawlPage(ctx, page));
    }),
  );
  return requests;
}

function reportLatencies(ctx: FaultContext, logins: Paced, at: { baselineTo: number; crawlFrom: number; crawlTo: number }): void {
  const likesBefore = window(ctx.load.samples, 0, at.baselineTo);
  const likesDuring = window(ctx.load.samples, at.crawlFrom, at.crawlTo);
  ctx.figure({
    name: "signed-in like p50 / p99 during the crawl",
    value: `${ms(likesDuring.p50)} / ${ms(likesDuring.p99)} (before the flush ${ms(likesBefore.p50)} / ${ms(likesBefore.p99)}); ${likesDuring.count} likes, errors ${countsText(likesDuring.errors)}`,
    target: { text: "p99 ≤ 1 s, 0 errors", met: likesDuring.count > 0 && likesDuring.p99 <= 1_000 && likesDuring.errorCount === 0 },
  });
  const loginsBefore = window(logins.samples, 0, at.baselineTo);
  const loginsDuring = window(logins.samples, at.crawlFrom, at.crawlTo);
  ctx.figure({
    name: "login p50 / p99 during the crawl",
    value: `${ms(loginsDuring.p50)} / ${ms(loginsDuring.p99)} (before the flush ${ms(loginsBefore.p50)} / ${ms(loginsBefore.p99)}); ${loginsDuring.count} logins, errors ${countsText(loginsDuring.errors)}`,
    target: { text: "p99 ≤ 1 s, 0 errors", met: loginsDuring.count > 0 && loginsDuring.p99 <= 1_000 && loginsDuring.errorCount === 0 },
  });
}

function reportCrawl(ctx: FaultContext, crawl: readonly CrawlRequest[]): void {
  const codes = new Map<string, number>();
  for (const request of crawl) for (const code of new Set(request.errors)) codes.set(code, (codes.get(code) ?? 0) + 1);
  const internal = codes.get("INTERNAL_SERVER_ERROR") ?? 0;
  const latencies = crawl.map((r) => r.ms);
  ctx.figure({
    name: "crawl requests",
    value: `${crawl.filter((r) => r.errors.length === 0).length} of ${crawl.length} without error (requests with an error, by code: ${countsText(codes)}); p50 ${ms(percentile(latencies, 50))}, p99 ${ms(percentile(latencies, 99))}`,
    target: { text: "none INTERNAL_SERVER_ERROR", met: internal === 0 },
  });
}

function reportMemory(ctx: FaultContext, peak: number, beforeFlush: number, after: { readonly used: number; readonly max: number }): void {
  ctx.figure({
    name: "Redis used_memory, peak from the flush on",
    value: `${mb(peak)} of maxmemory ${after.max > 0 ? mb(after.max) : "none"} (${mb(beforeFlush)} before the flush, ${mb(after.used)} after the crawl)`,
    target: { text: "< maxmemory", met: after.max > 0 && peak < after.max },
  });
}

export const coldCrawl: ChaosCase = {
  name: "cold-crawl",
  summary: `Redis flushed (its data lost), then ${crawlers} anonymous crawlers read ${crawlPosts.toLocaleString("en")} posts ${pageSize} at a time (posts(ids:)) while signed-in users like (${likesPerSecond}/s) and log in (${loginsPerSecond}/s); Redis maxmemory ${maxMemory.value}, ${maxMemory.source}`,
  layout: "npm start",
  redisAppendOnly: true,
  redisMaxMemory: maxMemory.value,
  // Every request comes from 127.0.0.1: the per-address sign-in budget would refuse the logins, not test the crawl.
  env: { RATE_LIMIT_IP_SIGN_INS: "0", RATE_LIMIT_USERNAME_LOGINS: "0" },
  load: { likesPerSecond, viewers: 0 },
  loadSeconds: 6,
  async prepare(ctx) {
    const seeded = await seedPosts(ctx.databaseUrl, { tag: `${ctx.tag}k`, users: 1_000, posts: crawlPosts, firstPostLikes: 500 });
    crawlIds = seeded.postIds;
    ctx.ownPosts(crawlIds);
    ctx.note(`${crawlPosts} posts with ${seeded.likes} likes written to PostgreSQL`);
  },
  async inject(ctx) {
    const logins = startLogins(ctx);
    const sampler = sampleMemory(ctx);
    try {
      await new Promise((resolve) => setTimeout(resolve, baselineMs));
      const baselineTo = ctx.elapsedMs();
      await settleBeforeFlush(ctx);
      const beforeFlush = await memory(singleRedis(ctx));
      await ctx.redisClient.flushall();
      ctx.note(`Redis FLUSHALL (used_memory was ${mb(beforeFlush.used)}); likes resume, ${crawlers} crawlers start`);
      ctx.load.resume();
      const peakFrom = sampler.readings.length;

      const crawlFrom = ctx.elapsedMs();
      const requests = await crawl(ctx);
      const crawlTo = ctx.elapsedMs();
      ctx.note(`crawl over: ${requests.length} requests in ${ms(crawlTo - crawlFrom)}`);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await sampler.stop();
      await logins.stop();
      const after = await memory(singleRedis(ctx));

      reportLatencies(ctx, logins, { baselineTo, crawlFrom, crawlTo });
      reportCrawl(ctx, requests);
      const peak = Math.max(...sampler.readings.slice(peakFrom), after.used);
      reportMemory(ctx, peak, beforeFlush.used, after);
    } finally {
      await sampler.stop();
      await logins.stop();
      ctx.load.resume();
    }
  },
};
