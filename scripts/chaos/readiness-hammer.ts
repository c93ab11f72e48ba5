// readiness-hammer: GET /health/ready is public and load balancers poll it; a
// probe that costs store work per request turns a hammered probe into an outage
// of everything else. 32 connections probe it as fast as they are answered for
// 15 s, beside a steady 200 likes and 20 feeds (100 posts each, signed in) a
// second. Redis commands per probe: the commands run during the hammer, less
// what the same steady load ran per second in a baseline window just before it
// (per command: a command the slowed load ran less of offsets nothing), over the
// probes answered; PostgreSQL transactions likewise. Latencies of likes
// and feeds run from when each was due (both are sent on a schedule).
import http from "node:http";
import pg from "pg";
import { at, singleRedis, type ChaosCase } from "./case.js";
import type { CastUser } from "./cast.js";
import { countsText, ms, percentile, window, type Figure } from "./figures.js";
import { startPaced } from "./paced.js";
import { callsBetween, commandCalls } from "./redis-figures.js";
import { seedPosts } from "./seed-posts.js";

const probers = 32;
const hammerMs = 15_000;
const warmUpMs = 3_000;
const baselineMs = 10_000;
const likesPerSecond = 200;
const feedsPerSecond = 20;
const feedPosts = 1_000;

const feedQuery = "query($ids: [ID!]!) { posts(ids: $ids) { id counts { likes reads comments } viewerHasLiked } }";

let feedIds: readonly string[] = [];

/** `n` distinct ids of `ids`, at random. */
function sample(ids: readonly string[], n: number): string[] {
  const picked = new Set<string>();
  while (picked.size < Math.min(n, ids.length)) picked.add(ids[Math.floor(Math.random() * ids.length)] as string);
  return [...picked];
}

/** PostgreSQL transactions of the case's database so far (statistics lag up to a second behind). */
async function transactions(sql: pg.Client): Promise<number> {
  const row = await sql.query<{ n: string }>("SELECT (xact_commit + xact_rollback)::text AS n FROM pg_stat_database WHERE datname = current_database()");
  return Number(row.rows[0]?.n ?? 0);
}

/** 32 keep-alive connections asking GET /health/ready, each again as soon as it is answered. */
function hammer(url: string, stopAtMs: number, clockMs: () => number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: probers });
  const statuses = new Map<string, number>();
  const count = (what: string) => statuses.set(what, (statuses.get(what) ?? 0) + 1);
  const latencies: number[] = [];
  const probe = () =>
    new Promise<void>((resolve) => {
      const started = performance.now();
      const request = http.get(url, { agent, timeout: 10_000 }, (response) => {
        response.resume();
        response.on("end", () => {
          count(String(response.statusCode));
          latencies.push(performance.now() - started);
          resolve();
        });
      });
      request.on("timeout", () => request.destroy(new Error("timeout")));
      request.on("error", (error) => {
        count((error as { code?: string }).code ?? error.message);
        resolve();
      });
    });
  const loops = Array.from({ length: probers }, async () => {
    while (clockMs() < stopAtMs) await probe();
  });
  return {
    statuses,
    latencies,
    done: Promise.all(loops).then(() => agent.destroy()),
  };
}

export const readinessHammer: ChaosCase = {
  name: "readiness-hammer",
  summary: `${probers} connections probe GET /health/ready as fast as answered for ${hammerMs / 1000} s, beside a steady ${likesPerSecond} likes/s and ${feedsPerSecond} feeds/s (100 posts each, signed in)`,
  layout: "npm start",
  redisAppendOnly: true,
  // Steady likes on a schedule from 40 users, no views: the load the issue measured.
  load: { likers: 40, likesPerSecond, viewers: 0 },
  // 40 users read 20 feeds a second from one address: the query cost budgets would refuse the load, not test the probes.
  env: { RATE_LIMIT_IP_QUERY_COST: "0", RATE_LIMIT_VIEWER_QUERY_COST: "0" },
  loadSeconds: (warmUpMs + baselineMs + hammerMs + 2_000) / 1000,
  async prepare(ctx) {
    const seeded = await seedPosts(ctx.databaseUrl, { tag: `${ctx.tag}f`, users: 1_000, posts: feedPosts, firstPostLikes: 500 });
    feedIds = seeded.postIds;
    ctx.ownPosts(feedIds);
    ctx.note(`${feedPosts} posts with ${seeded.likes} likes written to PostgreSQL; reading each once so Redis holds them`);
    // Signed in: an anonymous read takes cold posts' counts from PostgreSQL and loads nothing.
    const reader = ctx.cast.likers[0]?.token;
    for (let i = 0; i < feedIds.length; i += 100) await ctx.api.must(feedQuery, { ids: feedIds.slice(i, i + 100) }, reader);
  },
  async inject(ctx) {
    const viewers = ctx.cast.likers;
    const feeds = startPaced(
      feedsPerSecond,
      () => ctx.elapsedMs(),
      async () => {
        const viewer = viewers[Math.floor(Math.random() * viewers.length)] as CastUser;
        const answer = await ctx.api.call(feedQuery, { ids: sample(feedIds, 100) }, viewer.token);
        return answer.errors?.length ? (answer.errors[0]?.extensions?.code ?? "error") : null;
      },
    );
    const sql = new pg.Client({ connectionString: ctx.databaseUrl });
    await sql.connect();
    try {
      await at(ctx, warmUpMs);
      const redisBefore = await commandCalls(singleRedis(ctx));
      const sqlBefore = await transactions(sql);
      const baselineFrom = ctx.elapsedMs();
      ctx.note("baseline window starts");
      await at(ctx, warmUpMs + baselineMs);
      const redisAtHammer = await commandCalls(singleRedis(ctx));
      const sqlAtHammer = await transactions(sql);
      const hammerFrom = ctx.elapsedMs();
      ctx.note(`${probers} connections probe /health/ready`);
      const probes = hammer(`${ctx.httpBase}/health/ready`, hammerFrom + hammerMs, () => ctx.elapsedMs());
      await probes.done;
      const hammerTo = ctx.elapsedMs();
      const redisAfter = await commandCalls(singleRedis(ctx));
      // Statistics of the other backends reach pg_stat_database within a second.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const sqlAfter = await transactions(sql);
      ctx.note("hammer over");
      await feeds.stop();

      const baselineSeconds = (hammerFrom - baselineFrom) / 1000;
      const hammerSeconds = (hammerTo - hammerFrom) / 1000;
      const baseline = callsBetween(redisBefore, redisAtHammer);
      const during = callsBetween(redisAtHammer, redisAfter);
      // Per command, what ran beyond the baseline's rate; commands that ran less (a slowed load) offset nothing.
      const grown = [...during.byCommand].map(([name, n]) => [name, n - ((baseline.byCommand.get(name) ?? 0) / baselineSeconds) * hammerSeconds] as const);
      const redisExcess = grown.reduce((sum, [, extra]) => sum + Math.max(0, extra), 0);
      const sqlExcess = sqlAfter - sqlAtHammer - ((sqlAtHammer - sqlBefore) / baselineSeconds) * (hammerSeconds + 1);
      const answered = [...probes.statuses].filter(([status]) => /^\d+$/.test(status)).reduce((n, [, c]) => n + c, 0);
      const perProbe = (redisExcess + Math.max(0, sqlExcess)) / Math.max(1, answered);
      const grew = grown
        .filter(([, extra]) => extra > 0.5 * hammerSeconds)
        .sort((a, b) => b[1] - a[1])
        .slice(0, 3)
        .map(([name, extra]) => `${name} +${Math.round(extra)}`);
      const figures: Figure[] = [
        {
          name: "store commands per probe",
          value: `${perProbe.toFixed(2)} (${answered} probes, ${Math.round(answered / hammerSeconds)}/s; beyond the load's own: Redis ${Math.round(redisExcess)}${grew.length ? ` (${grew.join(", ")})` : ""}, PostgreSQL ${Math.round(sqlExcess)} transactions)`,
          target: { text: "≤ 5", met: answered > 0 && perProbe <= 5 },
        },
      ];
      const before = window(ctx.load.samples, baselineFrom, hammerFrom);
      const hammered = window(ctx.load.samples, hammerFrom, hammerTo);
      const ratio = hammered.p99 / before.p99;
      figures.push({
        name: "like p50 / p99, before → hammered",
        value: `${ms(before.p50)} / ${ms(before.p99)} → ${ms(hammered.p50)} / ${ms(hammered.p99)} (p99 ×${ratio.toFixed(1)}; ${before.count} and ${hammered.count} likes, errors ${countsText(hammered.errors)})`,
        target: { text: "p99 ≤ 2× before", met: hammered.count > 0 && ratio <= 2 },
      });
      const feedsBefore = window(feeds.samples, baselineFrom, hammerFrom);
      const feedsHammered = window(feeds.samples, hammerFrom, hammerTo);
      figures.push({
        name: "feed p50 / p99, before → hammered",
        value: `${ms(feedsBefore.p50)} / ${ms(feedsBefore.p99)} → ${ms(feedsHammered.p50)} / ${ms(feedsHammered.p99)} (errors ${countsText(feedsHammered.errors)})`,
      });
      figures.push({ name: "probe answers", value: `${countsText(probes.statuses)}; p99 ${ms(percentile(probes.latencies, 99))}` });
      for (const figure of figures) ctx.figure(figure);
    } finally {
      await feeds.stop();
      await sql.end();
    }
  },
};
