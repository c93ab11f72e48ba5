// subscribe-crawl: an anonymous WebSocket client subscribes to the whole catalog,
// 100 posts at a time, taking each first message and moving on, while signed-in
// users like posts Redis does not hold (each like loads its post) and sign in.
// A subscription reads what Redis does not hold from PostgreSQL and loads
// nothing; its subscribes are capped per connection and charged to its address's
// budget; the likes and sign-ins of everyone else keep their pace.
import { createClient } from "graphql-ws";
import WebSocket from "ws";
import type { ChaosCase } from "./case.js";
import { castPassword, type CastUser } from "./cast.js";
import { countsText, ms, window } from "./figures.js";
import { gqlAt } from "./gql-at.js";
import { startPaced, type Paced } from "./paced.js";
import { seedPosts } from "./seed-posts.js";

const catalogSize = 3_200;
const pageSize = 100;
const crawlMs = 20_000;
const baselineMs = 2_000;
const coldLikesPerSecond = 20;
const signInsPerSecond = 4;

const subscription = `subscription($ids: [ID!]!) { postCounts(postIds: $ids) { id counts { likes reads comments collects } } }`;
const likeMutation = "mutation($id: ID!) { likePost(postId: $id) { changed } }";
const loginMutation = "mutation($u: String!, $p: String!) { login(username: $u, password: $p) { token } }";

let catalog: readonly string[] = [];

/** Subscribes to `ids` and resolves with the first message's error code (null for counts), then completes it. */
function firstMessage(client: ReturnType<typeof createClient>, ids: readonly string[]): Promise<string | null> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (code: string | null) => {
      if (settled) return;
      settled = true;
      stop();
      resolve(code);
    };
    const stop = client.subscribe<{ postCounts: { id: string } }>(
      { query: subscription, variables: { ids } },
      {
        next: (result) => {
          const code = result.errors?.[0]?.extensions?.code;
          done(typeof code === "string" ? code : result.errors?.length ? "error" : null);
        },
        error: (error) => done(String((Array.isArray(error) ? (error[0] as { extensions?: { code?: string } })?.extensions?.code : undefined) ?? "error")),
        complete: () => done("completed without a message"),
      },
    );
    setTimeout(() => done("no message within 10 s"), 10_000);
  });
}

export const subscribeCrawl: ChaosCase = {
  name: "subscribe-crawl",
  summary: `an anonymous WebSocket client subscribes to ${catalogSize.toLocaleString("en")} posts Redis does not hold, ${pageSize} at a time, for ${crawlMs / 1000} s, while signed-in users like such posts (${coldLikesPerSecond}/s) and sign in (${signInsPerSecond}/s)`,
  layout: "npm start",
  redisAppendOnly: true,
  // Every request comes from 127.0.0.1: the per-address sign-in budget would refuse the sign-ins, not test the crawl.
  env: { RATE_LIMIT_IP_SIGN_INS: "0", RATE_LIMIT_USERNAME_LOGINS: "0" },
  load: { likesPerSecond: 100, viewers: 0 },
  loadSeconds: 6,
  async prepare(ctx) {
    const seeded = await seedPosts(ctx.databaseUrl, { tag: `${ctx.tag}s`, users: 1_000, posts: catalogSize, firstPostLikes: 500 });
    catalog = seeded.postIds;
    ctx.ownPosts(catalog);
    ctx.note(`${catalogSize} posts with ${seeded.likes} likes written to PostgreSQL; Redis holds none of them`);
  },
  async inject(ctx) {
    await new Promise((resolve) => setTimeout(resolve, baselineMs));
    const users = [...ctx.cast.likers, ...ctx.cast.authors];
    // Liked posts: one in seven of the catalog, in order; the others only ever subscribed to.
    const likedPosts = catalog.filter((_, i) => i % 7 === 0);
    let nextLike = 0;
    let nextLogin = 0;
    const from = ctx.elapsedMs();
    const likes: Paced = startPaced(
      coldLikesPerSecond,
      () => ctx.elapsedMs(),
      async () => {
        const n = nextLike++;
        const answer = await gqlAt(
          ctx.api.url,
          likeMutation,
          { id: likedPosts[n % likedPosts.length] },
          { token: (users[n % users.length] as CastUser).token },
        );
        return answer.errors[0] ?? null;
      },
    );
    const logins: Paced = startPaced(
      signInsPerSecond,
      () => ctx.elapsedMs(),
      async () => {
        const user = users[nextLogin++ % users.length] as CastUser;
        return (await gqlAt(ctx.api.url, loginMutation, { u: user.username, p: castPassword })).errors[0] ?? null;
      },
    );
    const client = createClient({ url: ctx.api.url.replace(/^http/, "ws"), webSocketImpl: WebSocket, retryAttempts: 0, lazy: false, onNonLazyError: () => {} });
    const crawl = new Map<string, number>();
    let subscribes = 0;
    try {
      for (let page = 0; ctx.elapsedMs() < from + crawlMs; page = (page + 1) % Math.ceil(catalog.length / pageSize)) {
        const code = await firstMessage(client, catalog.slice(page * pageSize, (page + 1) * pageSize));
        subscribes++;
        crawl.set(code ?? "counts", (crawl.get(code ?? "counts") ?? 0) + 1);
      }
    } finally {
      await client.dispose();
      await likes.stop();
      await logins.stop();
    }
    const to = ctx.elapsedMs();
    ctx.note(`crawl over: ${subscribes} subscribes in ${ms(to - from)}`);
    ctx.figure({ name: "crawler's subscribes, by first message", value: countsText(crawl) });

    // Posts Redis holds now that nobody liked: each would be a load a subscription started.
    const liked = new Set(likedPosts);
    const pipeline = ctx.redisClient.pipeline();
    const unliked = catalog.filter((id) => !liked.has(id));
    for (const id of unliked) pipeline.exists(`cnt:{${Number(BigInt(id) % BigInt(ctx.partitions))}}:post:${id}`);
    const loadedUnliked = ((await pipeline.exec()) ?? []).filter(([, n]) => n === 1).length;
    ctx.figure({
      name: "posts only subscribed to that Redis holds (loads started by subscriptions)",
      value: `${loadedUnliked} of ${unliked.length}`,
      target: { text: "0", met: loadedUnliked === 0 },
    });
    const likesDuring = window(likes.samples, from, to);
    ctx.figure({
      name: "likes of posts Redis did not hold, p50 / p99",
      value: `${ms(likesDuring.p50)} / ${ms(likesDuring.p99)}; ${likesDuring.count} likes, errors ${countsText(likesDuring.errors)}`,
      target: { text: "p99 ≤ 1 s, 0 errors", met: likesDuring.count > 0 && likesDuring.p99 <= 1_000 && likesDuring.errorCount === 0 },
    });
    const loginsDuring = window(logins.samples, from, to);
    ctx.figure({
      name: "logins p50 / p99",
      value: `${ms(loginsDuring.p50)} / ${ms(loginsDuring.p99)}; ${loginsDuring.count} logins, errors ${countsText(loginsDuring.errors)}`,
      target: { text: "p99 ≤ 1 s, 0 errors", met: loginsDuring.count > 0 && loginsDuring.p99 <= 1_000 && loginsDuring.errorCount === 0 },
    });
  },
};
