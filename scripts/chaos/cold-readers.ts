// cold-readers: Redis flushed, then 32 signed-in readers (each its own user and
// address) read pages of 100 random posts of a catalog Redis no longer holds, in a
// loop for 60 s, while the load's users like their own posts. Every read must be
// answered from the first second (from PostgreSQL where Redis holds nothing yet),
// and Redis must fill itself back in behind the reads, whatever their number.
import pg from "pg";
import { createTokenService } from "../../src/graphql/tokens.js";
import { settleBeforeFlush, type ChaosCase, type FaultContext } from "./case.js";
import { countsText, ms, percentile, window } from "./figures.js";
import { gqlAt, type GqlAnswer } from "./gql-at.js";
import { seedPosts } from "./seed-posts.js";

const readers = 32;
const catalogSize = 3_200;
const pageSize = 100;
const readSeconds = 60;
const baselineMs = 3_000;
const likesPerSecond = 100;

const pageQuery = "query($ids: [ID!]!) { posts(ids: $ids) { id counts { likes reads comments } viewerHasLiked } }";
type Page = { posts: ({ id: string; counts: { likes: number }; viewerHasLiked: boolean } | null)[] };

interface Reader {
  readonly userId: string;
  readonly token: string;
  /** The address the reader's requests come from (X-Forwarded-For, TRUST_PROXY on). */
  readonly address: string;
}

/** What PostgreSQL holds of the catalog: each post's likes, and which readers liked which posts. */
interface Truth {
  readonly likes: ReadonlyMap<string, number>;
  readonly liked: ReadonlySet<string>;
}

interface ReadSample {
  readonly atMs: number;
  readonly ms: number;
  readonly error: string | null;
  readonly wrong: number;
}

let catalog: readonly string[] = [];
let cast: readonly Reader[] = [];
let truth: Truth = { likes: new Map(), liked: new Set() };

function randomPage(): string[] {
  const picked = new Set<string>();
  while (picked.size < pageSize) picked.add(catalog[Math.floor(Math.random() * catalog.length)] as string);
  return [...picked];
}

/** How many of a page's answers differ from what PostgreSQL holds. */
function wrongAnswers(reader: Reader, page: Page): number {
  let wrong = 0;
  for (const post of page.posts) {
    if (!post) {
      wrong++;
      continue;
    }
    if (post.counts.likes !== (truth.likes.get(post.id) ?? 0) || post.viewerHasLiked !== truth.liked.has(`${reader.userId}:${post.id}`)) wrong++;
  }
  return wrong;
}

/** How many catalog posts Redis holds, sampled every second: when the last one came back. */
function watchCatalog(ctx: FaultContext): { everyPostBackAtMs(): number | null; loaded(): Promise<number>; stop(): Promise<void> } {
  let everyPostBackAtMs: number | null = null;
  let sampling = true;
  const loaded = async () => {
    const pipeline = ctx.redisClient.pipeline();
    for (const id of catalog) pipeline.exists(`cnt:{${Number(BigInt(id) % BigInt(ctx.partitions))}}:post:${id}`);
    return ((await pipeline.exec()) ?? []).filter(([, n]) => n === 1).length;
  };
  const sampler = (async () => {
    while (sampling && everyPostBackAtMs === null) {
      if ((await loaded()) === catalog.length) everyPostBackAtMs = ctx.elapsedMs();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  })();
  return {
    everyPostBackAtMs: () => everyPostBackAtMs,
    loaded,
    async stop() {
      sampling = false;
      await sampler;
    },
  };
}

/** Every reader reads random pages, one at a time, until `untilMs` into the load. */
async function readPages(ctx: FaultContext, untilMs: number): Promise<ReadSample[]> {
  const samples: ReadSample[] = [];
  await Promise.all(
    cast.map(async (reader) => {
      while (ctx.elapsedMs() < untilMs) {
        const startedAt = ctx.elapsedMs();
        const answer: GqlAnswer<Page> = await gqlAt(ctx.api.url, pageQuery, { ids: randomPage() }, { token: reader.token, forwardedFor: reader.address });
        const error = answer.errors[0] ?? (answer.data ? null : `HTTP ${answer.status}`);
        samples.push({ atMs: startedAt, ms: ctx.elapsedMs() - startedAt, error, wrong: answer.data ? wrongAnswers(reader, answer.data) : 0 });
      }
    }),
  );
  return samples;
}

function reportReads(ctx: FaultContext, samples: readonly ReadSample[], from: number): void {
  const answered = samples.filter((s) => s.error === null);
  const firstSecond = samples.filter((s) => s.atMs < from + 1_000);
  const share = (part: number, whole: number) => (whole === 0 ? 0 : (100 * part) / whole);
  const codes = new Map<string, number>();
  for (const s of samples) if (s.error) codes.set(s.error, (codes.get(s.error) ?? 0) + 1);
  const latencies = samples.map((s) => s.ms);
  ctx.figure({
    name: "reads answered",
    value: `${share(answered.length, samples.length).toFixed(2)} % of ${samples.length} (first second: ${share(firstSecond.filter((s) => s.error === null).length, firstSecond.length).toFixed(1)} % of ${firstSecond.length}); errors ${countsText(codes)}`,
    target: {
      text: "≥ 99 %, from the first second",
      met:
        samples.length > 0 &&
        share(answered.length, samples.length) >= 99 &&
        firstSecond.length > 0 &&
        share(firstSecond.filter((s) => s.error === null).length, firstSecond.length) >= 99,
    },
  });
  ctx.figure({
    name: "read latency p50 / p99 / max",
    value: `${ms(percentile(latencies, 50))} / ${ms(percentile(latencies, 99))} / ${ms(Math.max(...latencies))}`,
    target: { text: "p99 ≤ 500 ms", met: percentile(latencies, 99) <= 500 },
  });
  ctx.figure({
    name: "SERVICE_UNAVAILABLE among reads",
    value: String(codes.get("SERVICE_UNAVAILABLE") ?? 0),
    target: { text: "0", met: (codes.get("SERVICE_UNAVAILABLE") ?? 0) === 0 },
  });
  const wrong = answered.reduce((n, s) => n + s.wrong, 0);
  ctx.figure({
    name: "posts answered unlike PostgreSQL (likes or viewerHasLiked)",
    value: `${wrong} of ${answered.length * pageSize}`,
    target: { text: "0", met: wrong === 0 },
  });
}

export const coldReaders: ChaosCase = {
  name: "cold-readers",
  summary: `Redis flushed, then ${readers} signed-in readers (each its own user and address) read pages of ${pageSize} random posts of ${catalogSize.toLocaleString("en")} Redis no longer holds, in a loop for ${readSeconds} s, while the load likes ${likesPerSecond}/s`,
  layout: "npm start",
  redisAppendOnly: true,
  // Each reader's requests carry its own address, as readers behind a proxy do.
  env: { TRUST_PROXY: "true" },
  load: { likesPerSecond, viewers: 0 },
  loadSeconds: 6,
  async prepare(ctx) {
    const seeded = await seedPosts(ctx.databaseUrl, { tag: `${ctx.tag}r`, users: 1_000, posts: catalogSize, firstPostLikes: 500 });
    catalog = seeded.postIds;
    ctx.ownPosts(catalog);
    const sql = new pg.Client({ connectionString: ctx.databaseUrl });
    await sql.connect();
    try {
      // Readers among the users who liked the catalog, so viewerHasLiked is true for some of their posts.
      const users = await sql.query<{ id: string }>(`SELECT id::text FROM users WHERE username LIKE $1 ORDER BY id LIMIT $2`, [`${ctx.tag}r_s%`, readers]);
      const tokens = createTokenService({ secret: ctx.jwtSecret, ttlSeconds: 3_600 });
      cast = await Promise.all(users.rows.map(async (u, i) => ({ userId: u.id, token: await tokens.issue(BigInt(u.id)), address: `198.51.100.${i + 1}` })));
      const likes = await sql.query<{ target_id: string; value: string }>(
        `SELECT target_id::text, value::text FROM counters WHERE target_type = 'post' AND name = 'like' AND target_id = ANY($1::bigint[])`,
        [catalog],
      );
      const liked = await sql.query<{ user_id: string; target_id: string }>(
        `SELECT user_id::text, target_id::text FROM likes WHERE target_type = 'post' AND user_id = ANY($1::bigint[]) AND target_id = ANY($2::bigint[])`,
        [cast.map((r) => r.userId), catalog],
      );
      truth = {
        likes: new Map(likes.rows.map((r) => [r.target_id, Number(r.value)])),
        liked: new Set(liked.rows.map((r) => `${r.user_id}:${r.target_id}`)),
      };
      ctx.note(`${catalogSize} posts with ${seeded.likes} likes written to PostgreSQL; ${cast.length} readers, who liked ${truth.liked.size} of them`);
    } finally {
      await sql.end();
    }
  },
  async inject(ctx) {
    await new Promise((resolve) => setTimeout(resolve, baselineMs));
    const baselineTo = ctx.elapsedMs();
    await settleBeforeFlush(ctx);
    await ctx.redisClient.flushall();
    ctx.note(`Redis FLUSHALL; likes resume, ${readers} readers start`);
    ctx.load.resume();
    const from = ctx.elapsedMs();
    const watch = watchCatalog(ctx);
    const samples = await readPages(ctx, from + readSeconds * 1000);
    const readTo = ctx.elapsedMs();
    await watch.stop();
    ctx.note(`readers done: ${samples.length} reads in ${ms(readTo - from)}`);

    reportReads(ctx, samples, from);
    const back = watch.everyPostBackAtMs();
    ctx.figure({
      name: "every catalog post back in Redis",
      value: back === null ? `not within ${readSeconds} s (${await watch.loaded()} of ${catalog.length})` : `${ms(back - from)} after the flush`,
      target: { text: `≤ ${readSeconds} s, reads going on`, met: back !== null && back - from <= readSeconds * 1000 },
    });
    const likesBefore = window(ctx.load.samples, 0, baselineTo);
    const likesDuring = window(ctx.load.samples, from, readTo);
    ctx.figure({
      name: "the load's like p50 / p99 meanwhile",
      value: `${ms(likesDuring.p50)} / ${ms(likesDuring.p99)} (before the flush ${ms(likesBefore.p50)} / ${ms(likesBefore.p99)}); ${likesDuring.count} likes, errors ${countsText(likesDuring.errors)}`,
    });
  },
};
