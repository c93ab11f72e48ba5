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
import { singleRedis, type ChaosCase } from "./case.js";
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
    const users = [...ctx.cast.likers, ...ctx.cast.authors];
    let next = 0;
    const logins: Paced = startPaced(
      loginsPerSecond,
      () => ctx.elapsedMs(),
      async () => {
        const user = users[next++ % users.length] as CastUser;
        const answer = await ctx.api.call(loginMutation, { u: user.username, p: castPassword });
        return answer.errors?.length ? (answer.errors[0]?.extensions?.code ?? "error") : null;
      },
    );
    const memoryReadings: number[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        memoryReadings.push((await memory(singleRedis(ctx))).used);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    })();
    try {
      await new Promise((resolve) => setTimeout(resolve, baselineMs));
      const baselineTo = ctx.elapsedMs();
      ctx.note("likes paused; waiting for the pipeline to settle");
      await ctx.load.pause();
      const settled = await ctx.settle(30_000);
      if (!settled.settled) throw new Error(`the pipeline did not settle before the flush: ${settled.left}`);
      const beforeFlush = await memory(singleRedis(ctx));
      await ctx.redisClient.flushall();
      ctx.note(`Redis FLUSHALL (used_memory was ${mb(beforeFlush.used)}); likes resume, ${crawlers} crawlers start`);
      ctx.load.resume();
      const peakFrom = memoryReadings.length;

      const crawlFrom = ctx.elapsedMs();
      const crawl: { ms: number; errors: string[] }[] = [];
      await Promise.all(
        Array.from({ length: crawlers }, async (_, c) => {
          for (let page = c; page * pageSize < crawlIds.length; page += crawlers) {
            const started = Date.now();
            let errors: string[];
            try {
              const answer = await ctx.api.call(crawlQuery, { ids: crawlIds.slice(page * pageSize, (page + 1) * pageSize) }, undefined, 30_000);
              errors = (answer.errors ?? []).map((e) => e.extensions?.code ?? "no code");
            } catch (error) {
              errors = [(error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name];
            }
            crawl.push({ ms: Date.now() - started, errors });
          }
        }),
      );
      const crawlTo = ctx.elapsedMs();
      ctx.note(`crawl over: ${crawl.length} requests in ${ms(crawlTo - crawlFrom)}`);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      sampling = false;
      await sampler;
      await logins.stop();
      const after = await memory(singleRedis(ctx));

      const likesBefore = window(ctx.load.samples, 0, baselineTo);
      const likesDuring = window(ctx.load.samples, crawlFrom, crawlTo);
      ctx.figure({
        name: "signed-in like p50 / p99 during the crawl",
        value: `${ms(likesDuring.p50)} / ${ms(likesDuring.p99)} (before the flush ${ms(likesBefore.p50)} / ${ms(likesBefore.p99)}); ${likesDuring.count} likes, errors ${countsText(likesDuring.errors)}`,
        target: { text: "p99 ≤ 1 s, 0 errors", met: likesDuring.count > 0 && likesDuring.p99 <= 1_000 && likesDuring.errorCount === 0 },
      });
      const loginsBefore = window(logins.samples, 0, baselineTo);
      const loginsDuring = window(logins.samples, crawlFrom, crawlTo);
      ctx.figure({
        name: "login p50 / p99 during the crawl",
        value: `${ms(loginsDuring.p50)} / ${ms(loginsDuring.p99)} (before the flush ${ms(loginsBefore.p50)} / ${ms(loginsBefore.p99)}); ${loginsDuring.count} logins, errors ${countsText(loginsDuring.errors)}`,
        target: { text: "p99 ≤ 1 s, 0 errors", met: loginsDuring.count > 0 && loginsDuring.p99 <= 1_000 && loginsDuring.errorCount === 0 },
      });
      const codes = new Map<string, number>();
      for (const request of crawl) for (const code of new Set(request.errors)) codes.set(code, (codes.get(code) ?? 0) + 1);
      const internal = codes.get("INTERNAL_SERVER_ERROR") ?? 0;
      const latencies = crawl.map((r) => r.ms);
      ctx.figure({
        name: "crawl requests",
        value: `${crawl.filter((r) => r.errors.length === 0).length} of ${crawl.length} without error (requests with an error, by code: ${countsText(codes)}); p50 ${ms(percentile(latencies, 50))}, p99 ${ms(percentile(latencies, 99))}`,
        target: { text: "none INTERNAL_SERVER_ERROR", met: internal === 0 },
      });
      const peak = Math.max(...memoryReadings.slice(peakFrom), after.used);
      ctx.figure({
        name: "Redis used_memory, peak from the flush on",
        value: `${mb(peak)} of maxmemory ${after.max > 0 ? mb(after.max) : "none"} (${mb(beforeFlush.used)} before the flush, ${mb(after.used)} after the crawl)`,
        target: { text: "< maxmemory", met: after.max > 0 && peak < after.max },
      });
    } finally {
      sampling = false;
      await sampler;
      await logins.stop();
      ctx.load.resume();
    }
  },
};
